// folder_lock.cpp: flock(2) on a folder, counted per process.
#include "course/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace course {

namespace {

// One folder this process has locked. An entry stays in the table once made (its index is
// what a FolderLock holds); its descriptor is closed, and the lock dropped, when the count
// reaches 0, and the entry is used again if the folder is locked again.
struct Locked {
  pid_t owner = 0;  // a child made by fork() inherits the table, not the locks' ownership
  dev_t device = 0;
  ino_t inode = 0;
  int fd = -1;
  FolderLock::Mode mode = FolderLock::Mode::read;
  int count = 0;
};

std::mutex g_mutex;
std::vector<Locked> g_locked;

std::string busy_message(const std::filesystem::path& dir, FolderLock::Mode mode) {
  return dir.string() +
         (mode == FolderLock::Mode::write
              ? " is being written or read by another run of the course: wait for it to end, or "
                "choose another folder"
              : " is being written by another run of the course: wait for it to end");
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& dir, Mode mode) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::invalid_argument("FolderLock: " + dir.string() + ": " + std::strerror(err));
  }
  struct stat st {};
  ::fstat(fd, &st);
  const int operation = (mode == Mode::write ? LOCK_EX : LOCK_SH) | LOCK_NB;
  const std::lock_guard<std::mutex> guard(g_mutex);
  for (std::size_t i = 0; i < g_locked.size(); ++i) {
    Locked& l = g_locked[i];
    if (l.count == 0 || l.owner != ::getpid() || l.device != st.st_dev || l.inode != st.st_ino) {
      continue;
    }
    ::close(fd);  // this process holds the folder already: count the new holder
    if (mode == Mode::write && l.mode == Mode::read) {
      if (::flock(l.fd, operation) != 0) throw FolderBusy(busy_message(dir, mode));
      l.mode = Mode::write;
    }
    ++l.count;
    entry_ = static_cast<int>(i);
    return;
  }
  int result = 0;
  do {
    result = ::flock(fd, operation);
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) throw FolderBusy(busy_message(dir, mode));
    throw FolderBusy("cannot lock " + dir.string() + ": " + std::strerror(err));
  }
  const Locked entry{.owner = ::getpid(),
                     .device = st.st_dev,
                     .inode = st.st_ino,
                     .fd = fd,
                     .mode = mode,
                     .count = 1};
  for (std::size_t i = 0; i < g_locked.size(); ++i) {
    if (g_locked[i].count == 0 || g_locked[i].owner != ::getpid()) {
      g_locked[i] = entry;
      entry_ = static_cast<int>(i);
      return;
    }
  }
  g_locked.push_back(entry);
  entry_ = static_cast<int>(g_locked.size() - 1);
}

FolderLock::~FolderLock() { release(); }

FolderLock::FolderLock(FolderLock&& other) noexcept : entry_(other.entry_) { other.entry_ = -1; }

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    release();
    entry_ = other.entry_;
    other.entry_ = -1;
  }
  return *this;
}

void FolderLock::release() noexcept {
  if (entry_ < 0) return;
  const std::lock_guard<std::mutex> guard(g_mutex);
  Locked& l = g_locked[static_cast<std::size_t>(entry_)];
  if (--l.count == 0) {
    ::close(l.fd);  // closing the last descriptor of the open file drops the lock
    l.fd = -1;
  }
  entry_ = -1;
}

}  // namespace course
