// course::Chapter: the frame every chapter runs in. Exit codes, numbered steps, the 100-column
// promise (notices, prose and shape traces wrap by themselves), real shapes in a trace, the
// closing "What to notice" / "Try this", and knob rules that stop a run before it writes.
#include "course/chapter.hpp"
#include "course/cli.hpp"

#include "chapter_run.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace test_chapter {

// What one Chapter::run did.
struct Ran {
  int code = -1;
  std::string out, err;  // the narration, and stderr
};

// Runs `lesson` in a chapter "09_test" on the command line `words` (plus --no-plots unless the
// words name --out), narrating into a string.
Ran run(course::Chapter& ch, std::ostringstream& narration, std::vector<std::string> words,
        const std::function<void()>& lesson) {
  words.insert(words.begin(), "09_test");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Ran r;
  r.code = ch.run(static_cast<int>(words.size()), argv.data(), lesson);
  const std::string help = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  r.out = narration.str() + help;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Chapter, StepsAreNumberedBannersInOrder) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.intro("seed {}", ch.seed());
    ch.step("First: x = {}", 1);
    ch.say("a line\nanother line");
    ch.step("Second");
  });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "09 . A test chapter (seed 7)\n"
                   "\n== 1. First: x = 1 " +
                       std::string(88 - 19, '=') +
                       "\n"
                       "  a line\n"
                       "  another line\n"
                       "\n== 2. Second " +
                       std::string(88 - 13, '=') + "\n");
}

// ch.rng(name) is attn::stream_seed under the run's --seed: it follows the option, and is not
// the main stream Rng(seed()) nor the next seed's.
TEST(Chapter, ANamedStreamFollowsTheSeedOption) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  std::uint64_t first = 0;
  const Ran r =
      run(ch, text, {"--no-plots", "--seed", "11"}, [&] { first = ch.rng("held-out").next_u64(); });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(first, attn::Rng(attn::stream_seed(11, "held-out")).next_u64());
  EXPECT_NE(first, attn::Rng(11).next_u64());
  EXPECT_NE(first, attn::Rng(12).next_u64());
}

// A reader who never saw the lecture notes is told where they are explained: under the opening
// line, wrapped like any narration, and at the end of --help.
TEST(Chapter, CitedNotesPointToTheSourcesPageInTheOpeningAndInHelp) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  ch.cites("notes 001 and 004");
  Ran r = run(ch, text, {"--no-plots"}, [&] { ch.intro("seed {}", ch.seed()); });
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "09 . A test chapter (seed 7)");
  EXPECT_EQ(lines[1].rfind("  Lecture notes 001 and 004: the course's sources", 0), 0u) << lines[1];
  for (const std::string& line : lines) EXPECT_LE(line.size(), course::Chapter::kWidth) << line;
  EXPECT_NE(r.out.find("docs/sources.md"), std::string::npos) << r.out;

  std::ostringstream help_text;
  course::Chapter help_ch("09_test", "A test chapter", 7, help_text);
  help_ch.cites("notes 001 and 004");
  r = run(help_ch, help_text, {"--help"}, [] {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Lecture notes 001 and 004"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("docs/sources.md"), std::string::npos) << r.out;
}

TEST(Chapter, NoticesAndProseWrapAtOneHundredColumnsWithoutSplittingWordsOrShapes) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "word" + std::to_string(i) + " ";
  long_text += "the shape [2, 5, 512] stays whole";
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.notice("{}", long_text);
    ch.prose("{}", long_text);
  });
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_GT(lines.size(), 4u) << "40 words do not fit on one line of a notice and one of prose";
  std::string words_back;
  for (const std::string& line : lines) {
    EXPECT_LE(line.size(), course::Chapter::kWidth) << line;
    EXPECT_TRUE(line.rfind("  -> ", 0) == 0 || line.rfind("     ", 0) == 0 ||
                line.rfind("  ", 0) == 0)
        << line;
  }
  EXPECT_EQ(lines[0].rfind("  -> word0 word1 ", 0), 0u);
  EXPECT_EQ(lines[1].rfind("     word", 0), 0u) << "a notice continues under its own text";
  EXPECT_NE(r.out.find("[2, 5, 512]"), std::string::npos) << "a shape is never split";
  // Wrapping only moves line breaks: the words come back in order.
  std::istringstream in(r.out);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  EXPECT_EQ(words[0], "->");
  EXPECT_EQ(words[1], "word0");
  EXPECT_EQ(words[40], "word39");
}

TEST(Chapter, FlowPrintsTheShapesOfTheTensorsItIsHanded) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const attn::Matrix ids(2, 6);   // [2 x 6]
  const attn::Batch x(2, 6, 32);  // [2, 6, 32]
  const attn::Matrix W(32, 8);    // [32 x 8]
  const Ran r = run(ch, text, {"--no-plots"}, [&] { ch.flow({{"ids", ids}, {"x", x}, {"W", W}}); });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "  ids [2 x 6] -> x [2, 6, 32] -> W [32 x 8]\n");
}

TEST(Chapter, ALongFlowWrapsBetweenStagesNeverBetweenALabelAndItsShape) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const attn::Batch x(2, 6, 32);  // [2, 6, 32]
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.flow({{"source embedded", x},
             {"self-attention", x},
             {"Add & Norm", x},
             {"feed-forward", x},
             {"Add & Norm", x},
             {"encoder output", x}});
  });
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  for (const std::string& line : lines) {
    EXPECT_LE(line.size(), course::Chapter::kWidth) << line;
    const bool ends_a_stage = line.ends_with("]") || line.ends_with("] ->");
    EXPECT_TRUE(ends_a_stage) << "a line breaks only after a stage's shape: " << line;
  }
}

TEST(Chapter, ShowPrintsLabelledRowsAndColumns) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  attn::Matrix m(2, 2);  // [2 x 2]
  m << 0.25f, 0.75f, 1, 0;
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.show("W", m, {.precision = 2, .row_labels = {"I", "dog"}, .col_labels = {"k^1", "k^2"}});
  });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "W [2 x 2]\n"
                   "        k^1   k^2\n"
                   "  I    0.25  0.75\n"
                   "  dog  1.00  0.00\n");
}

TEST(Chapter, FinishPrintsWhatToNoticeThenTryThisAligned) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.finish({"first fact", "second fact"},
              {{"--scale", "flatter weights"}, {"--heads 8 --seed 3", "another draw"}});
  });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "\n== What to notice " + std::string(88 - 18, '=') +
                       "\n"
                       "  -> first fact\n"
                       "  -> second fact\n"
                       "\n== Try this " +
                       std::string(88 - 12, '=') +
                       "\n"
                       "  09_test --scale              flatter weights\n"
                       "  09_test --heads 8 --seed 3   another draw\n");
}

TEST(Chapter, AnExceptionInTheLessonIsOneClearLineAndExitCodeOne) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const Ran r = run(ch, text, {"--no-plots"}, [&] {
    ch.say("before");
    throw std::invalid_argument("attention: Q is [5 x 64] but K is [5 x 32]");
  });
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "09_test: error: attention: Q is [5 x 64] but K is [5 x 32]\n");
  EXPECT_EQ(r.out, "  before\n") << "what was said before the error is kept";
}

// A whole chapter process whose lesson throws, ended with main()'s exit code.
[[noreturn]] void chapter_whose_lesson_throws() {
  std::ostringstream text;
  course::Chapter ch("01_test", "A test chapter", 1, text);
  char name[] = "01_test", no_plots[] = "--no-plots";
  char* argv[] = {name, no_plots, nullptr};
  std::exit(ch.run(2, argv, [] { throw std::runtime_error("the knob combination broke"); }));
}

TEST(ChapterDeathTest, AnEscapedErrorEndsTheProcessWithExitCodeOneNotAnAbort) {
  // Without run()'s catch this would be std::terminate's abort: exit code 134 and
  // "terminate called after throwing an instance of ...".
  EXPECT_EXIT(chapter_whose_lesson_throws(), ::testing::ExitedWithCode(1),
              "^01_test: error: the knob combination broke\n$");
}

TEST(Chapter, AKnobRuleStopsTheRunBeforeAnythingIsWritten) {
  const fs::path dir =
      fs::temp_directory_path() / ("attn_chapter_rule_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  int heads = 3, d_model = 8;
  ch.option("--heads", heads, "heads");
  ch.require_knobs([&] {
    return d_model % heads == 0 ? std::string()
                                : fmt::format("--heads {} does not divide {}", heads, d_model);
  });
  bool ran = false;
  const Ran r = run(ch, text, {"--out", (dir / "plots").string(), "--dump", (dir / "d/x").string()},
                    [&] { ran = true; });
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(ran);
  EXPECT_EQ(r.err.rfind("09_test: --heads 3 does not divide 8\n", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("Usage:"), std::string::npos) << "the usage follows the problem";
  EXPECT_FALSE(fs::exists(dir)) << "a rejected run creates no folder";
  // The same chapter with knobs that agree runs.
  std::ostringstream text2;
  course::Chapter ok("09_test", "A test chapter", 7, text2);
  ok.option("--heads", heads, "heads");
  ok.require_knobs([&] { return d_model % heads == 0 ? std::string() : "no"; });
  EXPECT_EQ(run(ok, text2, {"--no-plots", "--heads", "4"}, [] {}).code, 0);
}

TEST(Chapter, StepIsIgnoredWithoutATerminal) {
  // ctest runs with stdin and stdout not a terminal: --step must never wait there.
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  const Ran r = run(ch, text, {"--no-plots", "--step"}, [&] {
    ch.step("One");
    ch.step("Two");
    ch.finish({}, {});
  });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("[Enter"), std::string::npos);
}

// Counts the occurrences of `piece` in `text`.
std::size_t count_of(const std::string& text, const std::string& piece) {
  std::size_t n = 0;
  for (std::size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) {
    ++n;
  }
  return n;
}

// What a chapter printed on a pseudo-terminal, as a learner sees it.
struct OnTerminal {
  int status = -1;  // as waitpid() gives it
  std::string out;  // everything the terminal showed, prompts and echoed Enters included
  std::size_t steps = 0, mores = 0;  // "[Enter: next step]" and "[Enter: more]" answered
};

// Runs the chapter `chapter --no-plots --step` on a pseudo-terminal of `rows` x `columns`
// (0 x 0: the size a new one has, which the chapter reads as 24 x 80), and presses Enter at
// every prompt, as a learner does.
OnTerminal run_on_terminal(const std::string& chapter, unsigned short rows,
                           unsigned short columns) {
  OnTerminal r;
  winsize size{};
  size.ws_row = rows;
  size.ws_col = columns;
  int terminal = -1;
  const pid_t pid = ::forkpty(&terminal, nullptr, nullptr, &size);
  if (pid < 0) {
    ADD_FAILURE() << "forkpty failed";
    return r;
  }
  if (pid == 0) {
    const std::string exe = attn_test::bin_dir() + "/" + chapter;
    ::execl(exe.c_str(), exe.c_str(), "--no-plots", "--step", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::size_t answered = 0;
  while (true) {
    pollfd p{terminal, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) {  // 20 s without a byte: the chapter is stuck
      ::kill(pid, SIGKILL);
      ADD_FAILURE() << "no output for 20 s; so far:\n" << r.out;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(terminal, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the chapter ended and closed the terminal
    r.out.append(buf, static_cast<std::size_t>(n));
    r.steps = count_of(r.out, "[Enter: next step]");
    r.mores = count_of(r.out, "[Enter: more]");
    for (; answered < r.steps + r.mores; ++answered) {
      if (::write(terminal, "\n", 1) != 1) ADD_FAILURE() << "could not press Enter";
    }
  }
  ::close(terminal);
  ::waitpid(pid, &r.status, 0);
  return r;
}

TEST(ChapterStep, OnATerminalPausesAfterEveryStepUntilEnter) {
  // A real chapter on a pseudo-terminal, as a learner runs it: every prompt is answered with
  // Enter, and the run must end normally after one pause per step boundary.
  const OnTerminal r = run_on_terminal("02_attention_by_hand", 0, 0);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out;
  // Chapter 02 has 7 steps: a pause before steps 2..7 and one before "What to notice".
  EXPECT_EQ(r.steps, 7u) << r.out;
  EXPECT_NE(r.out.find("== What to notice"), std::string::npos);
}

// The screen rows each stretch of output between two prompts fills on a terminal `columns`
// wide: a line wider than that fills several. Each stretch after a prompt starts with the
// Enter the terminal echoed, which ends the prompt's own row and is no row of text.
std::vector<std::size_t> rows_between_prompts(std::string out, std::size_t columns) {
  for (const std::string prompt : {"  [Enter: next step]", "  [Enter: more]"}) {
    for (std::size_t at; (at = out.find(prompt)) != std::string::npos;) {
      out.replace(at, prompt.size(), std::string(1, '\x01'));
    }
  }
  std::vector<std::size_t> rows;
  std::size_t start = 0;
  while (start <= out.size()) {
    const std::size_t end = std::min(out.find('\x01', start), out.size());
    std::string stretch = out.substr(start, end - start);
    if (start > 0 && stretch.starts_with("\r\n")) stretch.erase(0, 2);
    std::size_t filled = 0;
    std::istringstream lines(stretch);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::size_t width = 0;
      for (const char c : line) width += (static_cast<unsigned char>(c) & 0xC0) == 0x80 ? 0 : 1;
      filled += std::max<std::size_t>(1, (width + columns - 1) / columns);
    }
    rows.push_back(filled);
    start = end + 1;
  }
  return rows;
}

TEST(ChapterStep, AStepLongerThanTheScreenStopsWhenTheScreenIsFull) {
  // Chapter 04's step 7 is 47 lines long: on a 24-row terminal the first 24 scrolled away before
  // the "[Enter: next step]" under them. (Chapter 04 writes nothing to stderr, which shares the
  // terminal but not the count.) Every stretch between two prompts must fit above the
  // prompt's row, also on a terminal 80 columns wide, where 81-100-column lines take two rows.
  for (const auto& [rows, columns] :
       {std::pair<unsigned short, unsigned short>{24, 100}, {24, 80}}) {
    const OnTerminal r = run_on_terminal("04_softmax_scaling", rows, columns);
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out;
    EXPECT_NE(r.out.find("== What to notice"), std::string::npos) << "the whole chapter ran";
    EXPECT_GT(r.mores, 0u) << columns << " columns";
    const std::vector<std::size_t> filled = rows_between_prompts(r.out, columns);
    EXPECT_LE(*std::max_element(filled.begin(), filled.end()), rows - 1u)
        << columns << " columns: a stretch scrolled off before its prompt\n"
        << r.out;
  }
}

TEST(Chapter, HelpNamesTheChapterAndTheDefaultFigureFolder) {
  std::ostringstream text;
  course::Chapter ch("09_test", "A test chapter", 7, text);
  bool ran = false;
  const Ran r = run(ch, text, {"--help"}, [&] { ran = true; });
  EXPECT_EQ(r.code, 0);
  EXPECT_FALSE(ran);
  EXPECT_NE(r.out.find("Chapter 09: A test chapter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(course::default_plots_dir().string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--step"), std::string::npos);
}

TEST(DefaultPlotsDir, IsThePlotsFolderOfTheCheckoutTheTestWasBuiltIn) {
  // The test executable lives in <checkout>/build/<preset>/... like the chapters, so the
  // walk up from it must find this checkout's plots/, decided at run time.
  const fs::path expected = fs::path(ATTN_SOURCE_DIR) / "plots";
  EXPECT_EQ(fs::weakly_canonical(course::default_plots_dir()), fs::weakly_canonical(expected));
}

TEST(Print, WithCommasAndLabels) {
  EXPECT_EQ(course::with_commas(0), "0");
  EXPECT_EQ(course::with_commas(999), "999");
  EXPECT_EQ(course::with_commas(1000), "1,000");
  EXPECT_EQ(course::with_commas(640000), "640,000");
  EXPECT_EQ(course::with_commas(-1234567), "-1,234,567");
  EXPECT_EQ(course::labels("q^", 3), (std::vector<std::string>{"q^1", "q^2", "q^3"}));
  attn::TokenIds ids(2, 4);  // [2 x 4]: two sentences, 0 = <pad>
  ids << 5, 2, 0, 0,         //
      1, 3, 1, 4;
  EXPECT_EQ(course::token_labels(ids, 0), (std::vector<std::string>{"5", "2", "<pad>", "<pad>"}));
  EXPECT_EQ(course::token_labels(ids, 1, {{0, "<pad>"}, {1, "<bos>"}}),
            (std::vector<std::string>{"<bos>", "3", "<bos>", "4"}));
  EXPECT_THROW(course::token_labels(ids, 2), std::invalid_argument);
  // On a figure's axis a bare 5 would read as position 5: ids are written "id 5".
  EXPECT_EQ(course::id_labels(ids, 0),
            (std::vector<std::string>{"id 5", "id 2", "<pad>", "<pad>"}));
  EXPECT_EQ(course::id_labels(ids, 1, {{0, "<pad>"}, {1, "<bos>"}}),
            (std::vector<std::string>{"<bos>", "id 3", "<bos>", "id 4"}));
  EXPECT_THROW(course::id_labels(ids, 2), std::invalid_argument);
  EXPECT_THROW(course::format_matrix("m", attn::MatrixD::Zero(2, 2), {.row_labels = {"a"}}),
               std::invalid_argument);
}

}  // namespace test_chapter
