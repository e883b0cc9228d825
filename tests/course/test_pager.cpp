// course::Pager: --step's "[Enter: more]" when a step fills the terminal, with string streams
// standing in for the terminal and the keyboard.
#include "course/pager.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <sstream>
#include <string>

namespace test_pager {

// `lines` lines "l1\n", "l2\n", ... written through a pager of `rows` x `columns` whose
// keyboard holds `enters` presses of Enter; returns what reached the terminal.
struct Paged {
  std::string screen;
  int full_screens = 0;
  std::string keys_left;
};

Paged page(int rows, int columns, const std::string& text, const std::string& keys) {
  std::ostringstream terminal;
  std::istringstream keyboard(keys);
  course::Pager pager(terminal.rdbuf(), keyboard, rows, columns);
  std::ostream out(&pager);
  out << text << std::flush;
  std::string left;
  std::getline(keyboard, left, '\0');
  return {terminal.str(), pager.full_screens(), left};
}

std::string numbered_lines(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i) text += "l" + std::to_string(i) + "\n";
  return text;
}

TEST(Pager, PausesWhenTheScreenIsFull) {
  // 5 rows: 4 of text, then the prompt on the last one; Enter shows the next 4.
  const Paged p = page(5, 80, numbered_lines(1, 10), "\n\n\n");
  EXPECT_EQ(p.screen, numbered_lines(1, 4) + "  [Enter: more]" + numbered_lines(5, 8) +
                          "  [Enter: more]" + numbered_lines(9, 10));
  EXPECT_EQ(p.full_screens, 2);
  EXPECT_EQ(p.keys_left, "\n") << "one Enter per pause, and no more";
}

TEST(Pager, ATextThatFitsDoesNotPause) {
  // Exactly rows - 1 lines: the screen is full but nothing more comes, so no prompt.
  const Paged p = page(5, 80, numbered_lines(1, 4), "\n");
  EXPECT_EQ(p.screen, numbered_lines(1, 4));
  EXPECT_EQ(p.full_screens, 0);
}

TEST(Pager, TheStepPauseStartsANewScreen) {
  std::ostringstream terminal;
  std::istringstream keyboard("\n\n\n");
  course::Pager pager(terminal.rdbuf(), keyboard, 5, 80);
  std::ostream out(&pager);
  out << numbered_lines(1, 3) << std::flush;
  pager.prompt("  [Enter: next step]");
  out << numbered_lines(4, 7) << std::flush;  // four rows: a whole screen again, no pause
  EXPECT_EQ(terminal.str(), numbered_lines(1, 3) + "  [Enter: next step]" + numbered_lines(4, 7));
  EXPECT_EQ(pager.full_screens(), 0);
  out << "l8\n" << std::flush;
  EXPECT_EQ(pager.full_screens(), 1);
}

TEST(Pager, ALineWiderThanTheTerminalFillsSeveralRows) {
  // 10 columns: 25 characters take 3 rows, 10 exactly take 1, and a UTF-8 character counts once.
  const Paged p = page(4, 10, std::string(25, 'a') + "\nb\n", "\n");
  EXPECT_EQ(p.screen, std::string(25, 'a') + "\n  [Enter: more]b\n");
  const Paged q = page(4, 10, std::string(10, 'a') + "\n" + std::string(10, 'c') + "\nd\n", "\n");
  EXPECT_EQ(q.full_screens, 0) << q.screen;
  const std::string dots = "\xc2\xb7\xc2\xb7\xc2\xb7\xc2\xb7\xc2\xb7";  // five middle dots
  const Paged u = page(2, 5, dots + "\n" + dots + "\n", "\n");
  EXPECT_EQ(u.screen, dots + "\n  [Enter: more]" + dots + "\n");
}

TEST(Pager, StopsPausingOnceTheInputHasEnded) {
  // Ctrl-D: the one prompt that found no Enter is the last.
  const Paged p = page(3, 80, numbered_lines(1, 9), "");
  EXPECT_EQ(p.screen, numbered_lines(1, 2) + "  [Enter: more]" + numbered_lines(3, 9));
}

}  // namespace test_pager
