// course::FolderLock: one writer or any number of readers per folder, across processes; counted,
// not stacked, within one; dropped when the process ends, however it ends.
#include "course/folder_lock.hpp"

#include "chapter_run.hpp"
#include "child_process.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace test_folder_lock {

using Mode = course::FolderLock::Mode;
using attn_test::in_child;

// Exit codes of a child that tries to lock: 0 it got the lock, 1 it was refused as busy.
int try_lock(const fs::path& dir, Mode mode) {
  return in_child([&] {
    try {
      const course::FolderLock lock(dir, mode);
      return 0;
    } catch (const course::FolderBusy&) {
      return 1;
    }
  });
}

class FolderLockTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = attn_test::scratch("folder_lock",
                              testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FolderLockTest, AWriterKeepsEveryOtherProcessOut) {
  const course::FolderLock lock(dir_, Mode::write);
  EXPECT_EQ(try_lock(dir_, Mode::write), 1) << "a second writer";
  EXPECT_EQ(try_lock(dir_, Mode::read), 1) << "a reader while it writes";
}

TEST_F(FolderLockTest, ReadersShareAFolderAndKeepWritersOut) {
  const course::FolderLock lock(dir_, Mode::read);
  EXPECT_EQ(try_lock(dir_, Mode::read), 0);
  EXPECT_EQ(try_lock(dir_, Mode::write), 1);
}

TEST_F(FolderLockTest, TheLockEndsWithItsLastHolder) {
  {
    const course::FolderLock lock(dir_, Mode::write);
    {
      const course::FolderLock again(dir_, Mode::write);  // the same process: counted
      const course::FolderLock reading(dir_, Mode::read);
    }
    EXPECT_EQ(try_lock(dir_, Mode::read), 1) << "the first holder still holds it";
  }
  EXPECT_EQ(try_lock(dir_, Mode::write), 0) << "released with the last holder";
}

TEST_F(FolderLockTest, AReaderOfItsOwnProcessBecomesAWriter) {
  const course::FolderLock reading(dir_, Mode::read);
  const course::FolderLock writing(dir_, Mode::write);  // chapter 09: --load, then --save
  EXPECT_EQ(try_lock(dir_, Mode::read), 1) << "the folder is now held for writing";
}

TEST_F(FolderLockTest, WritersOfAFolderAndOfOneInsideItExcludeEachOther) {
  fs::create_directories(dir_ / "s" / "reversal");
  fs::create_directories(dir_ / "s" / "induction");
  {
    const course::FolderLock outer(dir_ / "s", Mode::write);
    EXPECT_EQ(try_lock(dir_ / "s" / "reversal", Mode::write), 1) << "inside a folder being written";
  }
  {
    const course::FolderLock inner(dir_ / "s" / "reversal", Mode::write);
    EXPECT_EQ(try_lock(dir_ / "s", Mode::write), 1) << "around a folder being written";
    EXPECT_EQ(try_lock(dir_ / "s" / "induction", Mode::write), 0) << "beside it: fine";
    EXPECT_EQ(try_lock(dir_ / "s", Mode::read), 0) << "reading the folder above: fine";
  }
}

TEST_F(FolderLockTest, TheSameFolderUnderAnotherNameIsTheSameFolder) {
  fs::create_directories(dir_ / "sub");
  fs::create_directory_symlink(dir_ / "sub", dir_ / "link");
  const course::FolderLock lock(dir_ / "sub", Mode::write);
  EXPECT_EQ(try_lock(dir_ / "link", Mode::write), 1);
  EXPECT_EQ(try_lock(dir_ / "sub" / ".." / "sub", Mode::write), 1);
}

TEST_F(FolderLockTest, ARunKilledWhileItHoldsTheLockReleasesIt) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    const course::FolderLock lock(dir_, Mode::write);
    char c = 'x';
    (void)::write(ready[1], &c, 1);
    ::pause();  // killed here
    std::_Exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(try_lock(dir_, Mode::write), 1) << "held by the other process";
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_EQ(try_lock(dir_, Mode::write), 0) << "a kill -9 leaves no lock behind";
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(FolderLockTest, AMissingFolderIsNamed) {
  const std::string message =
      attn_test::message_of([&] { course::FolderLock lock(dir_ / "nothing", Mode::read); });
  EXPECT_NE(message.find("cannot open the folder " + (dir_ / "nothing").string() + " to lock it"),
            std::string::npos)
      << message;
}

TEST_F(FolderLockTest, TheRefusalSaysWhatToDo) {
  const course::FolderLock lock(dir_, Mode::write);
  const int code = in_child([&] {
    try {
      const course::FolderLock other(dir_, Mode::write);
    } catch (const course::FolderBusy& e) {
      const std::string m = e.what();
      return m == dir_.string() +
                         " is being written or read by another run of the course: wait for it to "
                         "end, or choose another folder"
                 ? 0
                 : 2;
    }
    return 1;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace test_folder_lock
