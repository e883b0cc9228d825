// course::AtomicFile and course::interrupt: a final name holds a whole file or what it held
// before; a failed write names the reason; a planted link is never followed; a signal removes
// the temporaries, stops the child process and ends the program by that signal.
#include "course/files.hpp"
#include "course/interrupt.hpp"

#include "chapter_run.hpp"
#include "child_process.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace test_files {

using attn_test::read_file;

class FilesTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        attn_test::scratch("files", testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> listing() const { return attn_test::listing(dir_); }

  fs::path dir_;
};

using attn_test::in_child;

TEST_F(FilesTest, CommitPutsTheWholeFileUnderItsNameAndLeavesNoTemporary) {
  const fs::path target = dir_ / "a.txt";
  course::AtomicFile f(target);
  EXPECT_EQ(f.temporary().parent_path(), dir_);  // beside it, so the rename is atomic
  f.write("hello, ");
  EXPECT_FALSE(fs::exists(target)) << "nothing under the final name before commit()";
  f.write("world\n");
  f.commit();
  EXPECT_EQ(read_file(target), "hello, world\n");
  EXPECT_EQ(listing(), std::vector<std::string>{"a.txt"});
}

TEST_F(FilesTest, WithoutCommitTheOldFileStaysAndTheTemporaryGoes) {
  const fs::path target = dir_ / "a.txt";
  std::ofstream(target) << "old";
  {
    course::AtomicFile f(target);
    f.write("new, but never committed");
  }
  EXPECT_EQ(read_file(target), "old");
  EXPECT_EQ(listing(), std::vector<std::string>{"a.txt"});
}

TEST_F(FilesTest, TwoWritersOfOneNameNeverShareATemporary) {
  const fs::path target = dir_ / "a.txt";
  course::AtomicFile first(target), second(target);
  EXPECT_NE(first.temporary(), second.temporary());
  first.write("first");
  second.write("second");
  first.commit();
  second.commit();
  EXPECT_EQ(read_file(target), "second");  // whole: one writer's bytes, never a mixture
  EXPECT_EQ(listing(), std::vector<std::string>{"a.txt"});
}

TEST_F(FilesTest, APlantedLinkAtTheTemporaryNameIsNeverFollowed) {
  // The next temporary names are predictable (pid and a counter): plant links under the five
  // names after a probe's, pointing at a file the writer must never touch.
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "untouched";
  const fs::path target = dir_ / "a.txt";
  fs::path probe;
  {
    course::AtomicFile f(target);
    probe = f.temporary();  // "a.txt.<pid>-<k>.tmp"
  }
  const std::string name = probe.filename();
  const std::size_t dash = name.rfind('-');
  const int k = std::stoi(name.substr(dash + 1));
  for (int n = k + 1; n <= k + 5; ++n)
    fs::create_symlink(victim, dir_ / (name.substr(0, dash + 1) + std::to_string(n) + ".tmp"));
  course::AtomicFile f(target);
  EXPECT_EQ(f.temporary().filename(), name.substr(0, dash + 1) + std::to_string(k + 6) + ".tmp")
      << "the five taken names are skipped";
  f.write("the real content");
  f.commit();
  EXPECT_EQ(read_file(victim), "untouched");
  EXPECT_EQ(read_file(target), "the real content");
  EXPECT_FALSE(fs::is_symlink(target));
}

TEST_F(FilesTest, ALinkUnderTheFinalNameIsReplacedNotFollowed) {
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "untouched";
  const fs::path target = dir_ / "a.txt";
  fs::create_symlink(victim, target);
  course::write_file_atomically(target, "new");
  EXPECT_EQ(read_file(victim), "untouched");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(read_file(target), "new");
}

TEST_F(FilesTest, AFolderThatIsNotThereIsAWriteErrorWithTheReason) {
  try {
    course::write_file_atomically(dir_ / "no" / "such" / "a.txt", "x");
    FAIL() << "expected course::WriteError";
  } catch (const course::WriteError& e) {
    EXPECT_TRUE(attn_test::contains(e.what(), "No such file or directory")) << e.what();
    EXPECT_TRUE(attn_test::contains(e.what(), "a.txt")) << e.what();
  }
}

TEST_F(FilesTest, AWriteThatDoesNotFitFailsWithTheReasonAndLeavesNothing) {
  // A file size limit makes write(2) fail the way a full disk does (EFBIG instead of ENOSPC;
  // the chapters are tested on a real full file system in test_outputs). SIGXFSZ is ignored so
  // that the write fails instead of the process being killed.
  const fs::path target = dir_ / "big.bin";
  const int code = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      course::write_file_atomically(target, std::string(100000, 'x'));
    } catch (const course::WriteError& e) {
      return attn_test::contains(e.what(), "File too large") ? 0 : 2;
    }
    return 1;  // no error: the limit was not noticed
  });
  EXPECT_EQ(code, 0) << "1: the failed write went unnoticed; 2: the message lacks the reason";
  EXPECT_TRUE(listing().empty()) << "neither the final file nor a temporary may be left";
}

TEST_F(FilesTest, ASignalRemovesTheTemporaryAndEndsTheProgramByThatSignal) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const fs::path target = dir_ / "a.txt";
    const int code = in_child([&] {
      ::signal(sig, SIG_DFL);  // as a shell starts a program (gtest may have changed nothing)
      course::interrupt::install();
      course::AtomicFile f(target);
      f.write("half");
      ::raise(sig);
      return 0;  // not reached: the handler ends the process
    });
    EXPECT_EQ(code, 128 + sig) << "signal " << sig;
    EXPECT_TRUE(listing().empty()) << "signal " << sig << ": left " << listing().front();
  }
}

TEST_F(FilesTest, AnIgnoredSignalStaysIgnored) {
  // nohup sets SIGHUP to ignored; a program it starts must not start dying of it.
  const int code = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);
    course::interrupt::install();
    ::raise(SIGHUP);
    return 7;
  });
  EXPECT_EQ(code, 7);
}

TEST_F(FilesTest, ASignalStopsTheRegisteredChild) {
  const fs::path pid_file = dir_ / "child.pid";
  const int code = in_child([&] {
    course::interrupt::install();
    const pid_t child = ::fork();
    if (child == 0) {
      ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    const course::interrupt::StopOnSignal stop(child);
    std::ofstream(pid_file) << child;
    ::raise(SIGTERM);
    return 0;
  });
  EXPECT_EQ(code, 128 + SIGTERM);
  const pid_t child = std::stoi(read_file(pid_file));
  // The handler killed and reaped it: no such process any more (allow a moment for the kernel).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = ::kill(child, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the child " << child << " still runs";
  if (!gone) ::kill(child, SIGKILL);
}

}  // namespace test_files
