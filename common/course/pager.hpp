/// @file
/// --step on a terminal: a step longer than the screen stops when the screen is full, as `more`
/// does, so that no line scrolls away before it is read.
///
///     ... 23 lines of a step ...
///       [Enter: more]                <- the screen is full; Enter shows the next screenful
///     ... the rest of the step ...
///       [Enter: next step]           <- the pause between steps (course::Chapter)
///
/// course::Chapter puts a Pager in front of standard output only with --step, and only when
/// standard input and output are both a terminal; a pipe, a file, a test or CI see the text as
/// it is, with no prompt and no wait.
#pragma once

#include <cstddef>
#include <istream>
#include <streambuf>
#include <string_view>
#include <utility>

namespace course {

/// A stream buffer in front of a terminal's: it passes the text through unchanged and counts the
/// screen rows it fills since the last pause (a line wider than the terminal fills several; a
/// UTF-8 character counts one column). When `rows - 1` rows are full and more text comes, it
/// first writes "  [Enter: more]", waits for a line on `in`, and starts a new screen: the
/// prompt's row and the rows since the last pause are then all on the screen. prompt() is the
/// pause between steps, which starts a new screen too. Once `in` has ended (Ctrl-D), it pauses no
/// more. Unit-tested with string streams in place of the terminal.
class Pager : public std::streambuf {
 public:
  /// `terminal`: where the text goes; `in`: where Enter comes from; `rows` x `columns`: the
  /// terminal's size (terminal_size()), at least 2 x 1 whatever is given.
  Pager(std::streambuf* terminal, std::istream& in, int rows, int columns);

  /// Writes `text` (no newline: the Enter typed ends the line), waits for a line on the input
  /// and starts a new screen.
  void prompt(std::string_view text);
  /// How many times a full screen made it pause (not counting prompt()).
  int full_screens() const { return full_screens_; }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  bool put(char c);

  std::streambuf* terminal_;
  std::istream& in_;
  std::size_t rows_, columns_;
  std::size_t rows_done_ = 0;  // rows filled since the last pause
  std::size_t column_ = 0;     // characters on the current row
  int full_screens_ = 0;
  bool input_ended_ = false;
};

/// The rows and columns of the terminal on file descriptor `fd` (ioctl TIOCGWINSZ), and 24 x 80
/// for what it does not say (not a terminal, or a size of 0, as a new pseudo-terminal has).
std::pair<int, int> terminal_size(int fd);

}  // namespace course
