// cli.cpp: the shared chapter options, and turning every parse problem into exit code 2.
#include "course/cli.hpp"

#include "course/files.hpp"
#include "course/numbers.hpp"
#include "course/print.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace course {

namespace {

namespace fs = std::filesystem;

// An error message as printed: one longer than kMaxMessage is cut in the middle, so that a
// 130,000-character value does not flood the terminal, while both ends stay readable: the
// start names the option, the end says what is wrong with the value.
constexpr std::size_t kMaxMessage = 400, kHead = 200, kTail = 120;

bool continues_a_character(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string clip(const std::string& message) {
  if (message.size() <= kMaxMessage) return message;
  // Both cuts on character boundaries: half a UTF-8 sequence would print as garbage.
  std::size_t head = kHead, tail = message.size() - kTail;
  while (head > 0 && continues_a_character(message[head])) --head;
  while (tail < message.size() && continues_a_character(message[tail])) ++tail;
  std::size_t cut = 0;
  for (std::size_t i = head; i < tail; ++i) cut += continues_a_character(message[i]) ? 0 : 1;
  return message.substr(0, head) + " ... (" + std::to_string(cut) + " characters left out) ... " +
         message.substr(tail);
}

// The folders parse() creates for --out and --dump. They are removed again (deepest first,
// and only while still empty) unless keep() is called: a run that stops at a usage error or
// at --help leaves the disk as it found it, even when --out was made before --dump turned out
// to be unusable.
class NewFolders {
 public:
  NewFolders() = default;
  NewFolders(const NewFolders&) = delete;
  NewFolders& operator=(const NewFolders&) = delete;
  ~NewFolders() {
    if (keep_) return;
    std::error_code ec;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) fs::remove(*it, ec);
  }
  void keep() { keep_ = true; }

  // Creates `dir` and the missing folders above it one at a time (not create_directories(),
  // so that each new one is known), then proves a file can be written there: a bad folder is
  // reported before the chapter does any work rather than halfway through it.
  std::string create(const fs::path& dir) {
    fs::path prefix;
    for (const fs::path& part : dir) {
      prefix /= part;
      std::error_code ec;
      if (fs::is_symlink(fs::symlink_status(prefix, ec))) {
        // A link to nowhere exists as a name but not as a folder: create_directory() would
        // fail with "File exists", which sends the reader looking for the wrong problem.
        const fs::file_status target = fs::status(prefix, ec);
        const std::string link = prefix.string() + " is a symbolic link";
        const std::string where =
            prefix == dir ? "" : "cannot create folder " + dir.string() + ": ";
        // (status() reports a missing target as an error too; a loop is the one to name.)
        const bool missing =
            !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
        if (!missing) return where + link + " that cannot be followed: " + ec.message();
        if (!fs::exists(target)) {
          return where + link + " to " + fs::read_symlink(prefix, ec).string() +
                 ", which does not exist";
        }
      }
      if (fs::exists(fs::status(prefix, ec))) continue;
      if (!fs::create_directory(prefix, ec) && ec) {
        return "cannot create folder " + dir.string() + ": " + ec.message();
      }
      made_.push_back(prefix);
    }
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return dir.string() + " is not a folder";
    // The probe is a temporary that is never committed: created with O_EXCL | O_NOFOLLOW (a
    // planted link is not followed) and removed on the way out. It lies as deep as a dump's
    // arrays will, in a folder like the dump's hidden one and under a name as long as the
    // longest array's temporary, so that a path too long for the system fails here, not
    // after the work.
    const fs::path deep = dir / (".writing-probe-" + std::to_string(::getpid()));
    if (!fs::create_directory(deep, ec)) {
      return "cannot write into folder " + dir.string() + " (cannot create " +
             deep.filename().string() + ": " + (ec ? ec.message() : "it exists") + ")";
    }
    std::string problem;
    try {
      AtomicFile probe(deep / (std::string(100, 'p') + ".npy"));
      probe.write("probe");
    } catch (const WriteError& e) {
      problem = "cannot write into folder " + dir.string() + " (" + e.what() + ")";
    }
    fs::remove(deep, ec);
    return problem;
  }

 private:
  std::vector<fs::path> made_;
  bool keep_ = false;
};

// --out "" and --dump "" name no folder. Refused while parsing: an empty --dump would
// otherwise look like no --dump at all and silently dump nothing.
CLI::Validator folder_name() {
  return CLI::Validator(
      [](const std::string& text) {
        return text.empty() ? std::string("the folder name is empty") : std::string();
      },
      "");
}

// The edit distance between two names (optimal string alignment): the fewest insertions,
// deletions, substitutions and swaps of two neighbouring characters that turn `a` into `b`.
// "d-modle" is one swap from "d-model".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j]: the distance between the first i characters of a and the first j of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// Whether a word no option took was meant as an option: it starts with '-' and is not a
// number ("-5", "-.5" are values that lost their option).
bool looks_like_an_option(std::string_view word) {
  return word.size() > 1 && word[0] == '-' &&
         !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');
}

// The known options nearest to `typed` ("--d-modle"), as "--d-model", when they are close
// enough to be a typo: at most one edit in a name of up to 4 characters, two up to 8, three
// beyond (without the dashes). Several equally near ones are all named, in the usage's order.
std::vector<std::string> nearest_options(const CLI::App& app, std::string_view typed) {
  std::string_view name = typed.substr(0, typed.find('='));
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  if (name.empty()) return {};
  const std::size_t allowed = name.size() <= 4 ? 1 : name.size() <= 8 ? 2 : 3;
  std::vector<std::string> nearest;
  std::size_t best = allowed;  // the farthest a suggestion may be; then the nearest so far
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& known : opt->get_lnames()) {
      const std::size_t d = edit_distance(name, known);
      if (d >= name.size() || d > best) continue;
      if (d < best) nearest.clear();
      best = d;
      nearest.push_back("--" + known);
    }
  }
  return nearest;
}

// What to say about the words no option took (CLI11: "The following arguments were not
// expected: 16 --d-modle"): the first unknown option by name, with the known one it is nearest
// to; any others by name. A stray value after an unknown option was meant for it and goes
// unmentioned; stray values alone are named as such.
std::string unexpected_words(const CLI::App& app, const std::vector<std::string>& words) {
  std::vector<std::string> unknown, stray;
  for (const std::string& w : words) (looks_like_an_option(w) ? unknown : stray).push_back(w);
  if (unknown.empty()) {
    std::string list;
    for (const std::string& w : stray) list += (list.empty() ? "'" : ", '") + w + "'";
    return "unexpected argument" + std::string(stray.size() > 1 ? "s " : " ") + list +
           ": a value goes after its option, as in --seed 7";
  }
  const std::string& first = unknown.front();
  std::string message = "unknown option " + first.substr(0, first.find('='));
  const std::vector<std::string> nearest = nearest_options(app, first);
  for (std::size_t i = 0; i < nearest.size(); ++i) {
    message += (i == 0 ? "; did you mean " : i + 1 == nearest.size() ? " or " : ", ") + nearest[i];
  }
  if (!nearest.empty()) message += "?";
  for (std::size_t i = 1; i < unknown.size(); ++i) {
    message += (i == 1 ? " (also unknown: " : ", ") + unknown[i].substr(0, unknown[i].find('='));
  }
  return unknown.size() > 1 ? message + ")" : message;
}

// The first empty entry in a value of a list knob, as "--row: entry 3 of '1,2,' is empty", or "".
// CLI11 splits such a value at the knob's delimiter while it parses and drops the empty pieces,
// so "--row 1,2," ran with two entries and "--row 1,,2" with two, without a word: the values
// are looked at here first, as typed (`--row 1,2,`, `--row=1,2,`, and the words after the
// option up to the next option, which CLI11 also gives it).
std::string empty_list_entry(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") break;  // what follows is no option
    if (!word.starts_with("--")) continue;
    const std::size_t equals = word.find('=');
    const std::string name(word.substr(2, equals == word.npos ? word.npos : equals - 2));
    const CLI::Option* list = nullptr;
    for (const CLI::Option* opt : app.get_options()) {
      const std::vector<std::string>& names = opt->get_lnames();
      if (opt->get_delimiter() != '\0' &&
          std::find(names.begin(), names.end(), name) != names.end()) {
        list = opt;
      }
    }
    if (list == nullptr) continue;
    std::vector<std::string_view> values;
    if (equals != word.npos) values.push_back(word.substr(equals + 1));
    for (int j = i + 1; equals == word.npos && j < argc && !looks_like_an_option(argv[j]); ++j) {
      values.push_back(argv[j]);
    }
    for (std::string_view value : values) {
      const std::string typed(value);
      // CLI11 also reads "[1,2]" as a list; its brackets are no entry.
      if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
        value = value.substr(1, value.size() - 2);
      }
      const std::vector<std::string_view> entries =
          split_keeping_empty(value, list->get_delimiter());
      for (std::size_t k = 0; k < entries.size(); ++k) {
        if (entries[k].empty()) {
          return "--" + name + ": entry " + std::to_string(k + 1) + " of '" + typed + "' is empty";
        }
      }
    }
  }
  return "";
}

// --help laid out like the narration, within kLineWidth columns: CLI11 prints an option's
// description on one line after its name, however long (the --step line reached 121 columns and
// the footer naming the lecture notes 200). Here a description wraps at spaces under itself (a
// hanging indent at CLI11's description column) and the description and footer wrap too.
class WrappingFormatter : public CLI::Formatter {
 public:
  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    const std::string name = "  " + make_option_name(opt, is_positional) + make_option_opts(opt);
    const std::string description = make_option_desc(opt);
    if (description.empty()) return name + "\n";
    const std::string indent(column_width_, ' ');
    // The name and the first line of the description share a line when the name leaves room
    // (as CLI11 lays them out); a longer name has its line to itself.
    std::string out, first = indent;
    if (name.size() < column_width_) {
      first = name + std::string(column_width_ - name.size(), ' ');
    } else {
      out = name + "\n";
    }
    // A line break in a description starts a new paragraph under the same indent.
    std::size_t start = 0;
    while (start <= description.size()) {
      const std::size_t end = std::min(description.find('\n', start), description.size());
      out += wrap(std::string_view(description).substr(start, end - start), first, indent);
      first = indent;
      start = end + 1;
    }
    return out;
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string description = app->get_description();
    return description.empty() ? description : wrap(description, "", "");
  }
  std::string make_footer(const CLI::App* app) const override {
    const std::string footer = app->get_footer();
    return footer.empty() ? footer : wrap(footer, "", "");
  }
};

}  // namespace

CLI::Validator whole_number(std::intmax_t lo, std::uintmax_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        WholeNumber number;
        std::string problem = read_whole_number(text, lo, hi, number);
        if (problem.empty()) {
          text = (number.negative ? "-" : "") + std::to_string(number.magnitude);
        }
        return problem;
      },
      "");
}

CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& text) {
        double value = 0.0;
        std::string problem = read_decimal(text, value);
        if (!problem.empty()) return problem;
        // CLI11 reads the text again, with strtold and a cast to double, which rounds twice and
        // can land one unit in the last place away. Where it would, the text becomes 17
        // significant digits of the value: nearer to it than half a unit in the last place by
        // a margin that long double's rounding cannot cross, so CLI11 reads the value itself.
        double cli11 = 0.0;
        if (!CLI::detail::lexical_cast(text, cli11) ||
            std::memcmp(&cli11, &value, sizeof value) != 0) {
          char digits[64];
          const auto r =
              std::to_chars(digits, digits + sizeof digits, value, std::chars_format::general, 17);
          text.assign(digits, r.ptr);
        }
        return std::string();
      },
      "");
}

std::filesystem::path default_plots_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);  // Linux: the running binary
  if (!ec) {
    for (fs::path dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "chapters", ec) && fs::is_directory(dir / "plots", ec)) {
        return dir / "plots";
      }
    }
  }
  return "plots";
}

CLI::Validator finite_range(double lo, double hi) {
  const std::string range =
      "[" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](const std::string& text) {
        double v = 0.0;
        if (std::string problem = read_decimal(text, v); !problem.empty()) return problem;
        if (v < lo || v > hi) return text + " is not a number in " + range;
        return std::string();
      },
      "FLOAT in " + range);
}

ChapterCli::ChapterCli(std::string name, std::string about, std::uint64_t default_seed)
    : app_(std::move(about), std::move(name)) {
  opts_.seed = default_seed;
  opts_.out_dir = default_plots_dir();
  app_.formatter(std::make_shared<WrappingFormatter>());
  // CLI11's own help flag throws as soon as parsing reaches it, before unknown options and
  // bad values are reported, so "--no-such --help" would print the usage and exit 0. A plain
  // flag, acted on by parse() after every check, lets the errors come first.
  app_.set_help_flag();
  app_.add_flag("-h,--help", help_, "Print this help message and exit");
  // Decimal and digit for digit, like every integer knob: CLI11 alone would read "-1" into
  // the unsigned seed as 2^64 - 1, clamp 2^70 to 2^64 - 1 and take "010" as octal 8.
  option("--seed", opts_.seed, "Random seed (the same seed prints the same numbers)");
  app_.add_option("--out", opts_.out_dir, "Folder for the figures (.png, .gp, .dat)")
      ->capture_default_str()
      ->check(folder_name());
  app_.add_flag("--no-plots", opts_.no_plots, "Draw no figures");
  app_.add_option("--dump", opts_.dump_dir,
                  "Write the chapter's named intermediates as .npy files into this folder")
      ->check(folder_name());
}

std::optional<int> ChapterCli::parse(int argc, char** argv) {
  const auto usage_error = [this](const std::string& message) {
    std::cerr << app_.get_name() << ": " << clip(message) << "\n\n" << app_.help();
    return 2;
  };
  if (std::string problem = empty_list_entry(app_, argc, argv); !problem.empty()) {
    return usage_error(problem);
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    return usage_error(unexpected_words(app_, app_.remaining()));
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  for (const auto& rule : rules_) {
    if (std::string problem = rule(); !problem.empty()) return usage_error(problem);
  }
  // Every folder made from here on is removed again if the run stops before the end of
  // parse(): a usage error, or --help, writes nothing.
  NewFolders folders;
  // (With --help, a default --out nobody typed is no usage error: --help alone must work even
  // where the default plots folder cannot be written.)
  if (!opts_.no_plots && (!help_ || app_.count("--out") > 0)) {
    if (auto problem = folders.create(opts_.out_dir); !problem.empty()) {
      return usage_error("--out: " + problem);
    }
  }
  // The folders the run writes: made, proved writable, then locked until the run ends (a
  // second run writing one of them now is refused, not mixed with this one).
  std::vector<std::pair<std::string, fs::path>> written;
  if (!opts_.dump_dir.empty()) written.emplace_back("--dump", opts_.dump_dir);
  for (const FolderOption& f : folders_) {
    if (f.use == FolderUse::write && !f.value->empty()) written.emplace_back(f.flag, *f.value);
  }
  for (const auto& [flag, dir] : written) {
    if (auto problem = folders.create(dir); !problem.empty()) {
      return usage_error(flag + ": " + problem);
    }
  }
  if (auto problem = overlapping_folders(); !problem.empty()) return usage_error(problem);
  for (const auto& [flag, dir] : written) {
    try {
      locks_.emplace_back(dir, FolderLock::Mode::write);
    } catch (const std::exception& e) {
      return usage_error(flag + ": " + e.what());
    }
  }
  // A folder the run reads is held for reading until the run ends: no other run replaces it
  // between the check above (the chapter's rules) and the lesson's reading it.
  for (const FolderOption& f : folders_) {
    if (f.use != FolderUse::read || f.value->empty()) continue;
    try {
      locks_.emplace_back(*f.value, FolderLock::Mode::read);
    } catch (const FolderBusy& e) {
      return usage_error(f.flag + ": " + e.what());
    } catch (const std::invalid_argument&) {
      // not a folder to open: the chapter's own check names that problem
    }
  }
  if (!opts_.dump_dir.empty()) {
    // An earlier run's arrays are the course's to replace; anyone else's are not.
    if (auto problem = check_dump_folder(opts_.dump_dir); !problem.empty()) {
      return usage_error("--dump: " + problem);
    }
  }
  // Last, so that any problem above wins over --help; the folders are checked (they are made
  // and removed again) because a bad folder is as much a usage error as a bad value.
  if (help_) {
    locks_.clear();
    std::cout << app_.help();
    return 0;
  }
  folders.keep();
  return std::nullopt;
}

void ChapterCli::add_folder(const std::string& flag, std::string& value, const std::string& help,
                            FolderUse use) {
  app_.add_option(flag, value, help)->check(folder_name());
  folders_.push_back({.flag = flag, .value = &value, .use = use});
}

namespace {

// Whether `inner` is `outer` or lies inside it (both absolute and canonical).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

std::string ChapterCli::overlapping_folders() const {
  struct Named {
    std::string flag;
    fs::path dir;  // absolute, links resolved as far as the folders exist
    FolderUse use;
  };
  std::vector<Named> all;
  std::error_code ec;
  const auto add = [&](const std::string& flag, const fs::path& dir, FolderUse use) {
    if (dir.empty()) return;
    fs::path canonical = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) canonical = fs::absolute(dir, ec).lexically_normal();
    all.push_back({flag, canonical, use});
  };
  add("--dump", opts_.dump_dir, FolderUse::write);
  for (const FolderOption& f : folders_) add(f.flag, *f.value, f.use);
  for (std::size_t a = 0; a < all.size(); ++a) {
    for (std::size_t b = 0; b < all.size(); ++b) {
      if (a == b) continue;
      const Named &x = all[a], &y = all[b];
      if (!within(x.dir, y.dir)) continue;  // below: x is y's folder or inside it
      const bool same = within(y.dir, x.dir);
      const bool dump = x.flag == "--dump" || y.flag == "--dump";
      const bool x_written = x.use == FolderUse::write;
      if (dump || (x_written && !same) || (x_written && y.use == FolderUse::write)) {
        return x.flag + " " + x.dir.string() + (same ? " is the folder of " : " lies inside ") +
               y.flag + " " + y.dir.string() +
               ": the run would write its files into another's; give each its own folder";
      }
    }
  }
  return {};
}

Plotter ChapterCli::plotter() const { return Plotter(opts_.out_dir, !opts_.no_plots); }

Dumper ChapterCli::dumper(DumpSource source) const {
  return Dumper(opts_.dump_dir, std::move(source));
}

}  // namespace course
