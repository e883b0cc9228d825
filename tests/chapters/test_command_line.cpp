// Every chapter's command line as a learner meets it: --help that fits a terminal 100 columns
// wide, and an unknown option answered with the nearest known one.
#include "chapter_run.hpp"
#include "chapters.hpp"  // kChapters, generated from ATTN_CHAPTERS

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

namespace test_command_line {

namespace fs = std::filesystem;

using attn_test::contains;
using attn_test::kChapters;

// The widest line of `text`, in characters (a UTF-8 sequence counts once), and the line itself.
// The checkout's path, part of --out's default, is measured as "<checkout>": it is one word that
// no layout can break, as long as wherever the course was cloned.
std::pair<std::size_t, std::string> widest_line(std::string text) {
  const std::string checkout = ATTN_SOURCE_DIR;
  for (std::size_t at; (at = text.find(checkout)) != std::string::npos;) {
    text.replace(at, checkout.size(), "<checkout>");
  }
  std::pair<std::size_t, std::string> widest{0, ""};
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::size_t width = 0;
    for (const char c : line) width += (static_cast<unsigned char>(c) & 0xC0) == 0x80 ? 0 : 1;
    if (width > widest.first) widest = {width, line};
  }
  return widest;
}

TEST(Help, EveryChaptersHelpFitsIn100Columns) {
  // CLI11 wrote each description on one line: --step's reached 121 columns, the footer that
  // names the lecture notes 200. The usage after a usage error is the same text.
  const fs::path dir = attn_test::scratch("command_line", "help");
  for (const char* chapter : kChapters) {
    const attn_test::Output r = attn_test::run_chapter(chapter, "--help", dir);
    ASSERT_EQ(r.code, 0) << chapter << "\n" << r.err;
    const auto [width, line] = widest_line(r.out);
    EXPECT_LE(width, 100u) << chapter << ": " << line;
    // Wrapped, not cut: the --step description and the footer (where a chapter cites the
    // notes) end as they did.
    const std::string flat = attn_test::unwrapped(r.out);
    EXPECT_TRUE(contains(flat, "the output are a terminal)")) << chapter << "\n" << r.out;
    EXPECT_TRUE(!contains(flat, "Lecture notes") ||
                contains(flat, "\"The lecture notes\" on the site)."))
        << chapter << "\n"
        << r.out;
    const attn_test::Output bad = attn_test::run_chapter(chapter, "--no-such-option", dir);
    EXPECT_LE(widest_line(bad.err).first, 100u) << chapter << ": " << widest_line(bad.err).second;
  }
  fs::remove_all(dir);
}

}  // namespace test_command_line

namespace test_command_line {

TEST(UnknownOption, EveryChapterSuggestsTheNearestOption) {
  // "06_multi_head --d-modle 16" said "The following arguments were not expected: 16 --d-modle".
  const fs::path dir = attn_test::scratch("command_line", "unknown");
  for (const char* chapter : kChapters) {
    const attn_test::Output r = attn_test::run_chapter(chapter, "--sede 5 --no-plots", dir);
    EXPECT_EQ(r.code, 2) << chapter;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
              std::string(chapter) + ": unknown option --sede; did you mean --seed?");
    EXPECT_TRUE(contains(r.err, "Usage:")) << chapter << "\n" << r.err;
    EXPECT_EQ(r.out, "") << chapter;
  }
  const attn_test::Output r = attn_test::run_chapter("06_multi_head", "--d-modle 16", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "06_multi_head: unknown option --d-modle; did you mean --d-model?");
  fs::remove_all(dir);
}

}  // namespace test_command_line
