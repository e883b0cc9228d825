// chapter_run.hpp: running a chapter executable from a test, the way a learner does.
//
//   const attn_test::ChapterRun chapter("02_attention_by_hand");
//   const fs::path dir = chapter.scratch("queries");
//   const attn_test::Output r = chapter.run("--no-plots", dir);
//
// Every chapter test starts the real program (built into ATTN_BIN_DIR), captures what it prints
// and reads what it writes. Shared here so that eight chapter suites do it one way.
#pragma once

#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace attn_test {

namespace fs = std::filesystem;

/// What one run of a chapter did: its exit code (-1 when it did not exit normally) and output.
struct Output {
  int code = -1;
  std::string out, err;
};

/// The scratch folders this process made, each with the test that made it. When the process
/// ends, the folders of tests that passed are removed (a learner's /tmp does not fill up with
/// a folder per test and run); a failed test's folder stays, to be looked at.
class ScratchFolders {
 public:
  static ScratchFolders& instance() {
    // Made on the first scratch(), after GoogleTest's UnitTest (made while tests register), so
    // destroyed before it: the results it reads are still there.
    static ScratchFolders folders;
    return folders;
  }
  void add(const fs::path& dir) {
    made_.emplace_back(dir, ::testing::UnitTest::GetInstance()->current_test_info());
  }
  ScratchFolders(const ScratchFolders&) = delete;
  ScratchFolders& operator=(const ScratchFolders&) = delete;
  ~ScratchFolders() {
    for (const auto& [dir, test] : made_) {
      if (test != nullptr && !test->result()->Passed()) continue;
      std::error_code ignored;  // a folder already gone is what was wanted
      fs::remove_all(dir, ignored);
    }
  }

 private:
  ScratchFolders() = default;
  std::vector<std::pair<fs::path, const ::testing::TestInfo*>> made_;
};

/// A fresh, empty folder per test and process, so `ctest -j` can run tests side by side;
/// removed when the process ends if the test passed (ScratchFolders).
inline fs::path scratch(const std::string& prefix, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("attn_test_" + prefix + "_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ScratchFolders::instance().add(dir);
  return dir;
}

/// The names in `dir` (not below it), sorted; empty when it does not exist. A test compares it
/// with what a run may leave there, so a stray temporary or stale file shows.
inline std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

/// The whole file as bytes ("" when it cannot be read).
inline std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// Where the chapter executables are: this build's bin/ (ATTN_BIN_DIR), unless the environment
/// names another build in ATTN_TEST_BIN_DIR, e.g. an older commit's, to show that a new test
/// fails on the code before a fix.
inline std::string bin_dir() {
  const char* other = std::getenv("ATTN_TEST_BIN_DIR");
  return other != nullptr && *other != '\0' ? other : ATTN_BIN_DIR;
}

/// Runs `bin_dir()/<chapter> <args>` through the shell; stdout and stderr go through files
/// in `dir`, so output of any size is captured whole.
inline Output run_chapter(const std::string& chapter, const std::string& args,
                          const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = "'" + bin_dir() + "/" + chapter + "' " + args + " >'" + out.string() +
                          "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  return {(status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1, read_file(out),
          read_file(err)};
}

/// Starts `bin_dir()/<chapter> <args...>` with stdout discarded, reads standard error up to its
/// first line break, then stops the program (SIGTERM, as a learner's Ctrl-C would) and waits for
/// it. Returns that first line ("" when the program closed stderr without writing one): what a
/// long run says before its work, without waiting for the work.
inline std::string first_stderr_line(const std::string& chapter,
                                     const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const std::string program = bin_dir() + "/" + chapter;
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 2);
    if (!std::freopen("/dev/null", "w", stdout)) ::_exit(127);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string line;
  char c = 0;
  while (pid > 0 && ::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(fds[0]);
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  return line;
}

/// DIR/NAME.npy as a double matrix (a 1-D array becomes one row).
inline attn::MatrixD load(const fs::path& dir, const std::string& name) {
  return course::read_npy(dir / (name + ".npy")).to_matrix_d();
}

inline bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

/// The output with every line break and the indent after it read as one space: notices wrap at
/// 100 columns, and a sentence is checked whatever its line breaks.
inline std::string unwrapped(const std::string& text) {
  std::string flat;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      flat += text[i];
      continue;
    }
    while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
    flat += ' ';
  }
  return flat;
}

/// The lines of `text` that start with none of `prefixes`: what a chapter wrote to stderr
/// besides the measured, varying lines it may report there ("training: ", "measured: ").
inline std::string without_lines_starting(const std::string& text,
                                          const std::vector<std::string>& prefixes) {
  std::string rest;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    const auto starts = [&](const std::string& p) { return line.rfind(p, 0) == 0; };
    if (std::none_of(prefixes.begin(), prefixes.end(), starts)) rest += line + "\n";
    start = end + 1;
  }
  return rest;
}

/// Runs `chapter args` twice and expects exit 0 both times, identical stdout, at least
/// `min_bytes` of it, and the closing "What to notice" banner. (ctest's deterministic.<chapter>
/// also compares every file written, with the default options; this covers other knobs.)
inline void expect_two_identical_runs(const std::string& chapter, const std::string& args,
                                      std::size_t min_bytes) {
  const fs::path dir = scratch(chapter, "twice");
  const Output a = run_chapter(chapter, args, dir), b = run_chapter(chapter, args, dir);
  ASSERT_EQ(a.code, 0) << args << "\n" << a.err;
  ASSERT_EQ(b.code, 0) << args << "\n" << b.err;
  EXPECT_GT(a.out.size(), min_bytes) << args;
  EXPECT_EQ(a.out, b.out) << args;
  EXPECT_TRUE(contains(a.out, "== What to notice")) << args;
  fs::remove_all(dir);
}

/// One chapter as its suite runs it: the chapter's name is said once.
class ChapterRun {
 public:
  explicit ChapterRun(std::string chapter) : chapter_(std::move(chapter)) {}

  const std::string& name() const { return chapter_; }
  /// A fresh, empty folder for the test `test` of this chapter.
  fs::path scratch(const std::string& test) const { return attn_test::scratch(chapter_, test); }
  /// Runs the chapter with `args`, its output captured through files in `dir`.
  Output run(const std::string& args, const fs::path& dir) const {
    return run_chapter(chapter_, args, dir);
  }
  /// See attn_test::expect_two_identical_runs.
  void expect_two_identical_runs(const std::string& args, std::size_t min_bytes) const {
    attn_test::expect_two_identical_runs(chapter_, args, min_bytes);
  }

 private:
  std::string chapter_;
};

}  // namespace attn_test
