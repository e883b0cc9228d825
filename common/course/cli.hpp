/// @file
/// The options every chapter shares, on top of CLI11.
///
///   --help          usage, exit 0
///   --seed N        the random seed (each chapter has a fixed default)
///   --out DIR       where figures go (default: default_plots_dir())
///   --no-plots      draw nothing
///   --dump DIR      write the chapter's named intermediates as .npy files into DIR
///
/// A bad option, a bad value or an unusable folder prints the problem and the usage to stderr
/// and ends the program with exit code 2, before any work is done.
#pragma once

#include "course/dump.hpp"
#include "course/plot.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace course {

struct CommonOptions {
  std::uint64_t seed = 0;
  std::filesystem::path out_dir;
  bool no_plots = false;
  std::filesystem::path dump_dir;  ///< empty: no dump
};

/// A floating-point knob's check: a number in [lo, hi]. Unlike CLI::Range it also rejects
/// "nan", which passes every < and > comparison and would reach the chapter unchecked.
CLI::Validator finite_range(double lo, double hi);

/// Where figures go when --out is not given, decided when the program runs: the plots/ folder
/// of the checkout the executable was built in (found by walking up from the executable's own
/// folder to one that holds chapters/ and plots/), else plots/ in the current folder.
std::filesystem::path default_plots_dir();

class ChapterCli {
 public:
  /// `name` is the executable ("01_rnn"), `about` the one-line description under the usage.
  ChapterCli(std::string name, std::string about, std::uint64_t default_seed);

  /// Add chapter-specific knobs here before parse().
  CLI::App& app() { return app_; }
  /// A check across knobs (heads must divide d_model), run by parse() after CLI11 has read
  /// the values and before --out or --dump is created: it returns the problem, or "".
  void add_rule(std::function<std::string()> rule) { rules_.push_back(std::move(rule)); }

  /// Parses the command line. Returns an exit code when the program should stop now
  /// (0 after --help, 2 after any error, with the message and usage on stderr);
  /// std::nullopt when the chapter should run.
  std::optional<int> parse(int argc, char** argv);

  const CommonOptions& options() const { return opts_; }
  /// A plotter for --out, disabled by --no-plots.
  Plotter plotter() const;
  /// A dumper for --dump, disabled when it was not given.
  Dumper dumper() const;

 private:
  CLI::App app_;
  CommonOptions opts_;
  std::vector<std::function<std::string()>> rules_;
};

}  // namespace course
