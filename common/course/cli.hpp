/// @file
/// The options every chapter shares, on top of CLI11.
///
///   --help          usage, exit 0
///   --seed N        the random seed (each chapter has a fixed default)
///   --out DIR       where figures go (default: the repository's plots/)
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
#include <optional>
#include <string>

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

class ChapterCli {
 public:
  /// `name` is the executable ("01_rnn"), `about` the one-line description under the usage.
  /// Also installs the chapter's last line of defence: an exception that escapes main() is
  /// printed as "<name>: error: <what>" and ends the program with exit code 1, instead of
  /// std::terminate's abort (exit code 134 and a core dump).
  ChapterCli(std::string name, std::string about, std::uint64_t default_seed);

  /// Add chapter-specific knobs here before parse().
  CLI::App& app() { return app_; }

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
};

}  // namespace course
