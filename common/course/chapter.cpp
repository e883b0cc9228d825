// chapter.cpp: one chapter run, from the command line to the closing "Try this".
#include "course/chapter.hpp"

#include "course/cli.hpp"
#include "course/interrupt.hpp"
#include "course/pager.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <type_traits>

namespace course {

namespace {

// "02_attention_by_hand" -> "02": the chapter's number, as the opening line shows it.
std::string number_of(const std::string& name) { return name.substr(0, name.find('_')); }

// A space that does not break a line; written out as a space.
constexpr char kGlue = '\x1f';

}  // namespace

Chapter::Chapter(std::string name, std::string title, std::uint64_t default_seed)
    : Chapter(std::move(name), std::move(title), default_seed, std::cout) {}

Chapter::Chapter(std::string name, std::string title, std::uint64_t default_seed, std::ostream& out)
    : name_(std::move(name)),
      title_(std::move(title)),
      out_(out),
      cli_(std::make_unique<ChapterCli>(name_, "Chapter " + number_of(name_) + ": " + title_,
                                        default_seed)) {
  cli_->app().add_flag("--step", stepping_,
                       "Pause after each step until Enter (only when both the input and the "
                       "output are a terminal)");
}

Chapter::~Chapter() = default;

void Chapter::cites(const std::string& notes) {
  cites_ = "Lecture " + notes +
           ": the course's sources; what each note is, and where the "
           "course uses it, is on the sources page (docs/sources.md in the repository, "
           "\"The lecture notes\" on the site).";
  cli_->app().footer(cites_);
}

void Chapter::require_knobs(std::function<std::string()> rule) { cli_->add_rule(std::move(rule)); }

std::uint64_t Chapter::seed() const { return cli_->options().seed; }

attn::Rng Chapter::rng(std::string_view stream) const {
  return attn::Rng(attn::stream_seed(seed(), stream));
}

// ---- Knobs --------------------------------------------------------------------------------------

namespace {

// A knob's value as the run used it, for a dump's manifest: the variable itself, read after
// parsing (so "--scale=false" is false and 1.7320508075688772 keeps every digit), lists
// joined by commas as they are typed.
template <typename T>
std::string knob_text(const T& value) {
  if constexpr (requires { value.begin(); } && !std::is_convertible_v<T, std::string_view>)
    return fmt::format("{}", fmt::join(value, ","));
  else
    return fmt::format("{}", value);
}

}  // namespace

template <typename T>
Knob Chapter::add_knob(const std::string& flag, T& value, const std::string& help) {
  CLI::Option* o = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    o = cli_->app().add_flag(flag, value, help);
  } else {
    o = cli_->option(flag, value, help);
  }
  knob_values_.emplace_back(o->get_name(), [&value] { return knob_text(value); });
  using Element = std::conditional_t<std::is_same_v<T, std::vector<double>>, double, T>;
  return Knob(o, std::is_floating_point_v<Element>);
}

Knob Chapter::option(const std::string& flag, int& value, const std::string& help) {
  return add_knob(flag, value, help);
}
Knob Chapter::option(const std::string& flag, long& value, const std::string& help) {
  return add_knob(flag, value, help);
}
Knob Chapter::option(const std::string& flag, double& value, const std::string& help) {
  return add_knob(flag, value, help);
}
Knob Chapter::option(const std::string& flag, std::string& value, const std::string& help) {
  return add_knob(flag, value, help);
}
Knob Chapter::option(const std::string& flag, std::vector<double>& value, const std::string& help) {
  return add_knob(flag, value, help);
}
Knob Chapter::flag(const std::string& flag, bool& value, const std::string& help) {
  return add_knob(flag, value, help);
}

void Chapter::output_folder(const std::string& flag, std::string& value, const std::string& help) {
  cli_->add_folder(flag, value, help, FolderUse::write);
}

void Chapter::input_folder(const std::string& flag, std::string& value, const std::string& help) {
  cli_->add_folder(flag, value, help, FolderUse::read);
}

bool Chapter::given(const std::string& flag) const { return cli_->app().count(flag) > 0; }

Knob& Knob::range(double lo, double hi) {
  if (floating_) {
    option_->check(finite_range(lo, hi));
  } else {
    // Whole bounds, so that --help reads "INT in [1 - 64]".
    option_->check(CLI::Range(static_cast<long long>(lo), static_cast<long long>(hi)));
  }
  return *this;
}

Knob& Knob::one_of(std::initializer_list<std::string> choices) {
  option_->check(CLI::IsMember(std::vector<std::string>(choices)));
  return *this;
}

Knob& Knob::check(const std::string& kind, std::function<std::string(const std::string&)> check) {
  option_->check(CLI::Validator(
      [check = std::move(check)](const std::string& text) { return check(text); }, kind));
  return *this;
}

Knob& Knob::items(char delimiter, int min, int max) {
  option_->delimiter(delimiter)->expected(min, max);
  return *this;
}

namespace {

// Thrown by write_step when standard output has failed; not a std::exception, so that no
// lesson code catches it by accident.
struct OutputLost {};

// Standard input, output and error must be open before any file is: a closed descriptor 0, 1
// or 2 would be handed to the next file opened, and the narration would be written into a
// figure. A closed stdout is an error (the lesson would be lost); a closed stdin or stderr is
// filled with /dev/null.
bool standard_streams_open() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) return false;
    // open() takes the lowest free descriptor: in order 0, 2, that is `fd` itself.
    ::open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
  }
  return true;
}

}  // namespace

int Chapter::run(int argc, char** argv, const std::function<void()>& lesson) {
  if (!standard_streams_open()) {
    std::cerr << name_ << ": write error: standard output is closed\n";
    return 1;
  }
  interrupt::install();
  // `chapter | head`: a write to the closed pipe fails, and is reported as a write error.
  interrupt::ignore_broken_pipe();
  if (const std::optional<int> code = cli_->parse(argc, argv)) return output_checked(*code);
  // --step waits for a person: never in a pipe, a test or CI, where nobody presses Enter.
  stepping_ = stepping_ && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  // On the terminal, a step longer than the screen stops when the screen is full; the
  // narration's own buffer is put back however the run ends.
  struct RestoreBuffer {
    std::ostream& out;
    std::streambuf* buffer;
    ~RestoreBuffer() { out.rdbuf(buffer); }
  } restore{out_, out_.rdbuf()};
  if (stepping_) {
    const auto [rows, columns] = terminal_size(STDOUT_FILENO);
    pager_ = std::make_unique<Pager>(out_.rdbuf(), std::cin, rows, columns);
    out_.rdbuf(pager_.get());
  }
  plot_ = cli_->plotter();
  dump_ = cli_->dumper(source());
  try {
    lesson();
    // The lesson's text must have reached its reader before the dump replaces an earlier one:
    // a run that ends with a write error (exit 1) leaves the folder as it was.
    out_.flush();
    std::cout.flush();
    if (!out_ || !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      dump_.abandon();
      return output_checked(0);
    }
    dump_.finish();
  } catch (const OutputLost&) {
    dump_.abandon();  // the run failed: its dump must not look finished
    return output_checked(0);
  } catch (const std::exception& e) {
    dump_.abandon();
    out_.flush();
    std::cerr << name_ << ": error: " << e.what() << "\n";
    return 1;
  }
  return output_checked(0);
}

DumpSource Chapter::source() const {
  // The knobs that decide the numbers, with the values the run used: the seed and every
  // chapter knob, not where files go or how the run is shown.
  std::vector<std::pair<std::string, std::string>> knobs = {{"--seed", knob_text(seed())}};
  for (const auto& [knob, value] : knob_values_) knobs.emplace_back(knob, value());
  return {.chapter = name_, .seed = seed(), .options = std::move(knobs)};
}

int Chapter::output_checked(int code) {
  // Text to a full disk or a closed pipe fails only when the buffer is flushed, and nothing
  // else reports it: a run whose lesson was lost must not exit 0.
  errno = 0;  // the first failed write(2) below leaves its reason here
  out_.flush();
  std::cout.flush();
  const bool stdout_ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  int err = errno;
  if (out_ && std::cout && stdout_ok) return code;
  // stdio keeps the error flag but not its reason; one more byte, to an output that has lost
  // text already, asks the system for it (No space left on device, Bad file descriptor).
  if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  std::cerr << name_ << ": write error" << (err != 0 ? std::string(": ") + std::strerror(err) : "")
            << "\n";
  return 1;
}

void Chapter::write_intro(const std::string& details) {
  std::string line = number_of(name_) + " . " + title_;
  if (!details.empty()) line += " (" + details + ")";
  write_wrapped("", "  ", line);
  if (!cites_.empty()) write_wrapped("  ", "  ", cites_);
}

void Chapter::pause() {
  if (!pager_) return;  // --step on a terminal only
  out_.flush();
  pager_->prompt("  [Enter: next step]");
}

void Chapter::write_step(const std::string& title) {
  if (steps_ > 0) pause();
  ++steps_;
  banner(out_, std::to_string(steps_) + ". " + title);
  // A lesson written to a full disk or a closed pipe is lost: say so at the next step rather
  // than after minutes of training (chapter 09), and stop. run() reports it.
  out_.flush();
  std::cout.flush();
  if (!out_ || !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) throw OutputLost{};
}

void Chapter::write_lines(const std::string& text) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = std::string_view(text).substr(start, end - start);
    out_ << (line.empty() ? "" : "  ") << line << "\n";
    start = end + 1;
  }
}

void Chapter::write_wrapped(std::string_view first, std::string_view rest,
                            const std::string& text) {
  std::string lines = wrap(text, first, rest, kWidth);
  std::replace(lines.begin(), lines.end(), kGlue, ' ');
  out_ << lines;
}

void Chapter::gap() { out_ << "\n"; }

void Chapter::flow(std::initializer_list<Stage> stages) {
  std::string text;
  // kGlue holds a stage together, so a line breaks only after an arrow, never inside
  // "Add & Norm [2, 6, 32]" or between "Y_hat" and "[3 x 2]".
  for (const Stage& s : stages) {
    std::string stage = s.label + kGlue + s.shape;
    std::replace(stage.begin(), stage.end(), ' ', kGlue);
    text += (text.empty() ? "" : " -> ") + stage;
  }
  write_wrapped("  ", "     ", text);
}

void Chapter::finish(std::initializer_list<std::string> facts,
                     std::initializer_list<TryThis> try_this) {
  pause();
  banner(out_, "What to notice");
  for (const std::string& fact : facts) notice("{}", fact);
  if (try_this.size() > 0) {
    banner(out_, "Try this");
    std::size_t width = 0;
    for (const TryThis& t : try_this) width = std::max(width, t.options.size());
    for (const TryThis& t : try_this) {
      const std::string command = "  " + name_ + " " + t.options;
      write_wrapped(command + std::string(width - t.options.size() + 3, ' '),
                    std::string(command.size() + width - t.options.size() + 3, ' '), t.shows);
    }
  }
  if (const std::string f = plot_.summary(); !f.empty()) out_ << "\n" << f;
  if (const std::string d = dump_.summary(); !d.empty()) {
    out_ << "\n";
    write_wrapped("", "  ", d);
  }
}

}  // namespace course
