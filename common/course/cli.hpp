/// @file
/// The options every chapter shares, on top of CLI11.
///
///     --help          usage, exit 0
///     --seed N        the random seed (each chapter has a fixed default)
///     --out DIR       where figures go (default: default_plots_dir())
///     --no-plots      draw nothing
///     --dump DIR      write the chapter's named intermediates as .npy files into DIR
///
/// A folder the run writes (--dump, and a chapter's own such as --save) is made, proved
/// writable and locked for writing while the command line is read (add_folder()): a second run
/// writing the same folder at the same time is refused with exit code 2, as a bad folder is.
///
/// A bad option, a bad value or an unusable folder prints the problem and the usage to stderr
/// and ends the program with exit code 2, before any work is done and before --help: a command
/// line that is wrong is reported as wrong even when it also asks for the usage.
///
/// Numbers are read as written in decimal, the whole value (course/numbers.hpp): "--d-k 064" is
/// 64 (CLI11 alone would read it as octal 52), and "64.0", "1e3", "0x40" are not whole numbers
/// (whole_number()); a floating-point value is the double nearest to its decimal text, and
/// "0x10", "0x1p3", "inf", "nan" and " 1" are refused (decimal_number()). Each entry of a list
/// knob ("--row 3,1,4") is read the same way, and an empty entry ("1,2,", "1,,2") is refused by
/// its position: CLI11 would drop it without a word.
#pragma once

#include "course/dump.hpp"
#include "course/folder_lock.hpp"
#include "course/numbers.hpp"
#include "course/plot.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace course {

/// How a chapter uses a folder option (Chapter::output_folder, Chapter::input_folder).
enum class FolderUse {
  read,   ///< the run reads what is in it (--load DIR)
  write,  ///< the run writes into it (--save DIR), as --dump writes into its folder
};

struct CommonOptions {
  std::uint64_t seed = 0;
  std::filesystem::path out_dir;
  bool no_plots = false;
  std::filesystem::path dump_dir;  ///< empty: no dump
};

/// A floating-point knob's check: a number in [lo, hi]. Unlike CLI::Range it also rejects
/// "nan", which passes every < and > comparison and would reach the chapter unchecked.
CLI::Validator finite_range(double lo, double hi);

/// An integer knob's reading: the text must be a whole number in decimal digits with an optional
/// sign ("064", "+5", "-0"), between `lo` and `hi` (the limits of the knob's C++ type); it is
/// rewritten to its plain spelling ("64", "5", "0") for CLI11 and the checks after it. CLI11
/// 2.1.2 reads integers with strtoll(text, 0), which takes a leading 0 as octal ("064" is 52,
/// "09" an error) and "0x40" as hex, so one typed zero would silently change a knob. Anything
/// else is refused with a message that says it is not a whole number: "64.0", "1e3", "0x40",
/// "0b1", " 7", "" (with "did you mean 64?" when the text is a number of that value).
/// ChapterCli::option() adds it to every integer knob, before any check the chapter adds.
CLI::Validator whole_number(std::intmax_t lo, std::uintmax_t hi);

/// A floating-point knob's reading: the text must be a number written in decimal
/// (read_decimal(): "0.5", "-2", "1e-40", "+3"; not "0x10", "0x1p3", "inf", "nan", " 1", ""),
/// and the knob gets the double nearest to it. CLI11 2.1.2 reads a double with strtold, which
/// takes all of those, and casts the long double to double, which can round to the neighbour of
/// the nearest double; where it would, the text is rewritten to 17 significant digits of the
/// value, which it reads exactly. ChapterCli::option() adds it to every floating-point knob.
CLI::Validator decimal_number();

namespace detail {
/// The integer types a knob is read as: not bool (a flag) and no character type (CLI11 reads
/// a one-character value into those as the character's code).
template <typename T>
inline constexpr bool is_integer_knob_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char> &&
    !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;
/// What one value of a knob is: T itself, or the element of a list knob (std::vector<int>,
/// read from "--sizes 1,2,3") or of an std::optional.
template <typename T, typename = void>
struct knob_element {
  using type = T;
};
template <typename T>
struct knob_element<T, std::void_t<typename T::value_type>> {
  using type = typename T::value_type;
};
}  // namespace detail

/// Where figures go when --out is not given, decided when the program runs: the plots/ folder
/// of the checkout the executable was built in (found by walking up from the executable's own
/// folder to one that holds chapters/ and plots/), else plots/ in the current folder.
std::filesystem::path default_plots_dir();

class ChapterCli {
 public:
  /// `name` is the executable ("01_rnn"), `about` the one-line description under the usage.
  ChapterCli(std::string name, std::string about, std::uint64_t default_seed);

  /// A knob with a value, `--heads 4`, its default shown in --help. An integer knob, or a list
  /// of integers, is read as decimal (whole_number()), a floating-point one as a decimal number
  /// (decimal_number()), before the checks the caller adds to the
  /// returned option: `cli.option("--d-k", d_k, "...")->check(CLI::Range(1, 16384))` sees "64"
  /// for "064". (CLI11 runs an option's transforms before its checks, in the order added; a
  /// transform added later would run before this one.)
  template <typename T>
  CLI::Option* option(const std::string& flag, T& value, const std::string& help) {
    CLI::Option* opt = app_.add_option(flag, value, help)->capture_default_str();
    using Element = typename detail::knob_element<T>::type;
    if constexpr (detail::is_integer_knob_v<Element>) {
      opt->transform(
          whole_number(std::numeric_limits<Element>::min(), std::numeric_limits<Element>::max()));
    } else if constexpr (std::is_floating_point_v<Element>) {
      opt->transform(decimal_number());
    }
    return opt;
  }
  /// Add chapter-specific knobs here before parse() (option() for values).
  CLI::App& app() { return app_; }
  /// A folder option the chapter reads or writes (`--load DIR`, `--save DIR`): an option, not a
  /// knob. parse() treats a folder the run writes as it treats --dump's: made (with the folders
  /// above it) and proved writable, and locked for writing for the rest of the run
  /// (FolderLock), so that a bad, read-only or busy folder is a usage error before any work; a
  /// folder the run reads is locked for reading for the rest of the run (busy: a usage error).
  /// It also refuses folders that overlap: --dump's may not be, contain or lie inside another
  /// folder option's, and a folder the run writes may not lie inside one it reads or writes.
  /// (The same folder to read and to write is fine: a checkpoint is read before it is
  /// replaced.)
  void add_folder(const std::string& flag, std::string& value, const std::string& help,
                  FolderUse use);
  /// A check across knobs (heads must divide d_model), run by parse() after CLI11 has read
  /// the values and before --out or --dump is created: it returns the problem, or "".
  void add_rule(std::function<std::string()> rule) { rules_.push_back(std::move(rule)); }

  /// Parses the command line: first every value of a list knob (an option with a delimiter)
  /// for an empty entry, then with CLI11. Returns an exit code when the program should stop now
  /// (0 after --help or -h, with the usage on stdout and nothing written; 2 after any error,
  /// with the message and usage on stderr, even when --help was given too);
  /// std::nullopt when the chapter should run, with --out and --dump created.
  std::optional<int> parse(int argc, char** argv);

  const CommonOptions& options() const { return opts_; }
  /// A plotter for --out, disabled by --no-plots.
  Plotter plotter() const;
  /// A dumper for --dump (disabled when it was not given), whose manifest records `source`.
  Dumper dumper(DumpSource source = {}) const;

 private:
  CLI::App app_;
  CommonOptions opts_;
  bool help_ = false;  ///< --help or -h: our flag, not CLI11's, so that errors come first
  std::vector<std::function<std::string()>> rules_;
  struct FolderOption {
    std::string flag;
    std::string* value;
    FolderUse use;
  };
  std::vector<FolderOption> folders_;  ///< add_folder()
  std::vector<FolderLock> locks_;      ///< the folders the run writes or reads, until it ends

  /// The problem with the folders of this command line overlapping, or "".
  std::string overlapping_folders() const;
};

}  // namespace course
