/// @file
/// The progress of a training run, on standard error:
///
///     training: reversal  step  240/800  loss 0.0881  accuracy 0.998  61.2k tokens/s
///
/// On a terminal the line is redrawn in place (a carriage return) after every step; anywhere else
/// (a log file, a pipe, CI) it is printed as a plain line every `every` steps and at the last one,
/// so a log stays readable. Every line starts with "training: ".
///
/// Why standard error: the speed depends on the machine and the moment, and the course promises
/// that a chapter's standard output is the same bytes on every run (README, "What you can rely
/// on"). Everything measured in seconds goes here; everything computed goes to standard output.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace course {

class ProgressLine {
 public:
  /// `terminal`: redraw in place (true) or print plain lines (false); ask is_terminal() for
  /// the real stderr.
  ProgressLine(std::string task, std::int64_t total_steps, std::ostream& err, bool terminal,
               std::int64_t every = 100);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// After step `step` (1-based) of total_steps.
  void update(std::int64_t step, double loss, double accuracy, double tokens_per_second);
  /// A closing line, e.g. "reversal: 800 steps in 4.1 s, 51.2k tokens/s"; ends a redrawn line
  /// first.
  void finish(const std::string& summary);

  /// Whether standard error is a terminal.
  static bool is_terminal();

 private:
  std::string task_;
  std::int64_t total_, every_;
  std::ostream& err_;
  bool terminal_;
  bool open_line_ = false;  // a redrawn line waits for its newline
};

/// "61.2k" for 61234, "1.23M" for 1234567: a rate short enough for a progress line.
std::string short_count(double v);

}  // namespace course
