/// @file
/// A chapter run: its options, its voice, its figures and its dumps, in one object.
///
/// Every chapter's main.cpp has the same frame, so that what is left in it is the lecture:
///
///     void lesson(course::Chapter& ch, const Knobs& k) {
///       ch.step("Scores: alpha_ij = q^i . k^j");       // == 3. Scores: ... ========
///       Matrix A = ...;                                  // [n_k x n_q]
///       ch.show("A", A, {.row_labels = ..., .col_labels = ...});
///       ch.notice("column 2 is the four scores above: one query against all four keys.");
///       ch.dump("A", A);
///       ...
///       ch.finish({"fact the numbers showed", ...}, {{"--scale", "what it shows"}, ...});
///     }
///
///     int main(int argc, char** argv) {
///       course::Chapter ch("02_attention_by_hand", "Attention by hand", 2026);
///       Knobs k;
///       ch.flag("--scale", k.scale, "divide every score by sqrt(d_k)");
///       return ch.run(argc, argv, [&] { lesson(ch, k); });
///     }
///
/// run() is the one entry point: it parses the command line (a bad option is the problem and
/// the usage on stderr, exit 2, before anything is written), runs the lesson, and turns an
/// exception that escapes it into "<chapter>: error: <what>" and exit 1, never an abort.
///
/// The text goes to one stream (std::cout by default) and follows one layout: steps are
/// numbered banners, text is indented two spaces, notices start with "->", and no line the
/// chapter writes through this class is wider than kWidth columns: prose and notices wrap by
/// themselves. Formatting is {fmt}'s, checked against the arguments at compile time:
/// `ch.say("q^{} = ({:.4f})", i + 1, fmt::join(Q.col(i), ", "))`.
#pragma once

#include "attn/core/random.hpp"
#include "course/dump.hpp"
#include "course/plot.hpp"
#include "course/print.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @cond FORWARD_DECLARATIONS
// CLI11's option, which a Knob points to (chapter.cpp compiles CLI11; no chapter does).
namespace CLI {
class Option;
}  // namespace CLI
/// @endcond

namespace course {

class ChapterCli;
class Pager;

/// A knob just declared, to say which values it takes, chained on the declaration:
/// `ch.option("--heads", k.heads, "heads per layer").range(1, 64)`. The checks run while the
/// command line is parsed; a value that fails one ends the program with its message and the
/// usage, exit code 2, before the lesson starts. (The knobs are CLI11 options inside
/// chapter.cpp; a chapter's own file never compiles CLI11, the costliest header of the course.)
class Knob {
 public:
  /// The value lies in [lo, hi]: a whole number for an integer knob, a finite number for a
  /// floating-point one ("nan" passes every comparison, so it is refused by name).
  Knob& range(double lo, double hi);
  /// The value is one of `choices`, spelled exactly.
  Knob& one_of(std::initializer_list<std::string> choices);
  /// The value passes `check`, which returns the problem or "" when the text is fine; `kind`
  /// names the value in --help ("IDS").
  Knob& check(const std::string& kind, std::function<std::string(const std::string&)> check);
  /// A list knob: `min` to `max` values in one argument, separated by `delimiter` ("0.5,1,3").
  Knob& items(char delimiter, int min, int max);

 private:
  friend class Chapter;
  Knob(CLI::Option* option, bool floating) : option_(option), floating_(floating) {}
  CLI::Option* option_;
  bool floating_;
};

/// One command of the closing "Try this" list: the options, and what they show.
struct TryThis {
  std::string options;
  std::string shows;
};

/// One tensor in a shape trace: a label and the tensor's real shape (see shape()).
struct Stage {
  std::string label;
  std::string shape;

  template <typename T>
  Stage(std::string label_, const T& tensor)
      : label(std::move(label_)), shape(course::shape(tensor)) {}
};

class Chapter {
 public:
  /// The widest line the narration writes.
  static constexpr std::size_t kWidth = kLineWidth;

  /// `name` is the executable ("02_attention_by_hand"); `title` the chapter's title, shown in
  /// --help and in the opening line; `default_seed` the seed when --seed is not given.
  Chapter(std::string name, std::string title, std::uint64_t default_seed);
  /// The same, narrating into `out` instead of std::cout (the tests read it back).
  Chapter(std::string name, std::string title, std::uint64_t default_seed, std::ostream& out);
  ~Chapter();
  Chapter(const Chapter&) = delete;
  Chapter& operator=(const Chapter&) = delete;

  // ---- Knobs, declared before run() ---------------------------------------------------------

  /// A knob with a value: `--heads 4`. Its default is shown in --help. An integer knob (or a
  /// list of them) is read in decimal, "064" as 64, and "64.0" is refused as not a whole number,
  /// before the checks chained on the result (Knob; ChapterCli::option() and whole_number()).
  Knob option(const std::string& flag, int& value, const std::string& help);
  Knob option(const std::string& flag, long& value, const std::string& help);
  Knob option(const std::string& flag, double& value, const std::string& help);
  Knob option(const std::string& flag, std::string& value, const std::string& help);
  Knob option(const std::string& flag, std::vector<double>& value, const std::string& help);
  /// An on/off knob: `--scale`.
  Knob flag(const std::string& flag, bool& value, const std::string& help);
  /// A folder the run writes (`--save DIR`): an option, but not a knob, since it says where
  /// files go and not what is computed, so a manifest does not record it. Like --dump's, it is
  /// made, proved writable and locked for writing before the lesson starts: a file in its
  /// place, a read-only disk or another run writing it is a usage error (exit 2), not a failure
  /// after minutes of work (ChapterCli::add_folder).
  void output_folder(const std::string& flag, std::string& value, const std::string& help);
  /// A folder the run reads (`--load DIR`): an option, not a knob. No folder the run writes
  /// may lie inside it (the same folder is fine).
  void input_folder(const std::string& flag, std::string& value, const std::string& help);
  /// Whether the command line gave `flag` (a knob declared above), whatever its value.
  bool given(const std::string& flag) const;
  /// A rule that involves several knobs (heads must divide d_model), checked right after
  /// parsing and before any folder is made: return the problem, or "" when the knobs agree.
  void require_knobs(std::function<std::string()> rule);
  /// The lecture notes the chapter takes facts from, as its narration names them ("notes 001,
  /// 003 and 004"). A reader who never saw them learns what they are from the line this adds
  /// under the opening line and at the end of --help: the sources page, docs/sources.md.
  void cites(const std::string& notes);

  /// Parses the command line and runs `lesson`. Returns the exit code for main(): 0 after the
  /// lesson or --help, 2 after a usage error, 1 when the lesson throws.
  int run(int argc, char** argv, const std::function<void()>& lesson);

  // ---- What a lesson uses ------------------------------------------------------------------

  std::uint64_t seed() const;
  /// A generator for one named use of randomness beside the main stream attn::Rng(seed()):
  /// seeded by attn::stream_seed(seed(), stream), so it follows --seed without being another
  /// seed's main stream. `ch.rng("held-out")` says what the draws are for.
  attn::Rng rng(std::string_view stream) const;
  const std::string& name() const { return name_; }
  /// What a dump's manifest records about this run: the chapter, the seed and every knob with
  /// the value the run uses (not where files go). A checkpoint (checkpoint.hpp) records the same.
  DumpSource source() const;
  Plotter& plot() { return plot_; }
  /// Writes DIR/NAME.npy when --dump DIR was given; does nothing otherwise.
  template <typename... Args>
  void dump(Args&&... args) {
    dump_(std::forward<Args>(args)...);
  }
  /// The dumper itself, for the course functions that write several arrays at once
  /// (course::dump_parameters).
  Dumper& dumper() { return dump_; }

  /// The opening line, "02 . <title> (<details>)"; details formatted like say().
  template <typename... Args>
  void intro(fmt::format_string<Args...> details, Args&&... args) {
    write_intro(fmt::format(details, std::forward<Args>(args)...));
  }
  /// The next step's banner, numbered by the chapter ("== 3. Scores: ... ===="). With --step
  /// on a terminal, waits for Enter first, as a lecturer pauses between slides; a step longer
  /// than the screen also stops when the screen is full ("[Enter: more]", course/pager.hpp).
  template <typename... Args>
  void step(fmt::format_string<Args...> title, Args&&... args) {
    write_step(fmt::format(title, std::forward<Args>(args)...));
  }
  /// Lines exactly as formatted (tables, written-out sums), each indented two spaces; a "\n"
  /// in the text starts a new line. Not wrapped: a table is laid out by its author.
  template <typename... Args>
  void say(fmt::format_string<Args...> text, Args&&... args) {
    write_lines(fmt::format(text, std::forward<Args>(args)...));
  }
  /// A paragraph of prose, wrapped at word boundaries to kWidth columns, indented two spaces.
  template <typename... Args>
  void prose(fmt::format_string<Args...> text, Args&&... args) {
    write_wrapped("  ", "  ", fmt::format(text, std::forward<Args>(args)...));
  }
  /// What to notice about the numbers just shown: "  -> text", wrapped under itself.
  template <typename... Args>
  void notice(fmt::format_string<Args...> text, Args&&... args) {
    write_wrapped("  -> ", "     ", fmt::format(text, std::forward<Args>(args)...));
  }
  /// A matrix under "<name> [rows x cols]", with row and column labels when given.
  template <typename Derived>
  void show(std::string_view name, const Eigen::MatrixBase<Derived>& m,
            const PrintOptions& opts = {}) {
    print_matrix(out_, name, m, opts);
  }
  /// A shape trace: "  source ids [2 x 6] -> embedded [2, 6, 32] -> ...", each shape read
  /// from the tensor itself, wrapped before kWidth.
  void flow(std::initializer_list<Stage> stages);
  /// A blank line.
  void gap();

  /// The end of every chapter: "What to notice" (the facts the numbers showed), "Try this"
  /// (commands with their knobs), then the figures drawn and the arrays dumped.
  void finish(std::initializer_list<std::string> facts, std::initializer_list<TryThis> try_this);

  /// The stream the chapter narrates into, for the rare text that fits none of the above.
  std::ostream& out() { return out_; }

 private:
  void write_intro(const std::string& details);
  void write_step(const std::string& title);
  void write_lines(const std::string& text);
  void write_wrapped(std::string_view first, std::string_view rest, const std::string& text);
  void pause();
  /// `code`, or 1 with "write error" on stderr when the narration could not be written.
  int output_checked(int code);

  // Declares a knob of any of the types above (chapter.cpp) and records how to read its value
  // back for a dump's manifest.
  template <typename T>
  Knob add_knob(const std::string& flag, T& value, const std::string& help);

  std::string name_, title_, cites_;
  std::vector<std::pair<std::string, std::function<std::string()>>> knob_values_;
  std::ostream& out_;
  std::unique_ptr<ChapterCli> cli_;  // the command line: CLI11, compiled in chapter.cpp only
  std::vector<std::function<std::string()>> knob_rules_;
  bool stepping_ = false;
  std::unique_ptr<Pager> pager_;  // with --step on a terminal: in front of out_'s buffer
  int steps_ = 0;
  Plotter plot_{"", false};
  Dumper dump_{};
};

}  // namespace course

/// @dir common/course
/// How a chapter talks, namespace course: its command line, narration, printed matrices,
/// figures, dumps, checkpoints and .npy files. It builds on attn, never the other way round;
/// chapter.hpp is where every chapter's main.cpp starts.
