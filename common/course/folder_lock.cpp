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

// Locks `dir` in `mode` for this process (counted) and returns its entry in the table; throws
// FolderBusy with `busy` when another process holds it.
int lock_entry(const std::filesystem::path& dir, FolderLock::Mode mode, const std::string& busy) {
  using Mode = FolderLock::Mode;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::invalid_argument("cannot open the folder " + dir.string() +
                                " to lock it: " + std::strerror(err));
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
      if (::flock(l.fd, operation) != 0) throw FolderBusy(busy);
      l.mode = Mode::write;
    }
    ++l.count;
    return static_cast<int>(i);
  }
  int result = 0;
  do {
    result = ::flock(fd, operation);
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) throw FolderBusy(busy);
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
      return static_cast<int>(i);
    }
  }
  g_locked.push_back(entry);
  return static_cast<int>(g_locked.size() - 1);
}

void unlock_entry(int index) noexcept {
  const std::lock_guard<std::mutex> guard(g_mutex);
  Locked& l = g_locked[static_cast<std::size_t>(index)];
  if (--l.count == 0) {
    ::close(l.fd);  // closing the last descriptor of the open file drops the lock
    l.fd = -1;
  }
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& dir, Mode mode) {
  namespace fs = std::filesystem;
  if (mode == Mode::write) {
    // Every folder above is held for reading: a run writing one of them (a folder that holds
    // this one) is refused here, and this run's hold refuses it later.
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) throw std::invalid_argument("cannot lock " + dir.string() + ": " + ec.message());
    try {
      for (fs::path up = canonical.parent_path(); !up.empty(); up = up.parent_path()) {
        above_.push_back(lock_entry(up, Mode::read,
                                    dir.string() + " lies inside " + up.string() +
                                        ", which another run of the course is writing: wait "
                                        "for it to end, or choose another folder"));
        if (up == up.root_path()) break;
      }
      entry_ = lock_entry(dir, mode, busy_message(dir, mode));
    } catch (...) {
      release();
      throw;
    }
    return;
  }
  entry_ = lock_entry(dir, mode, busy_message(dir, mode));
}

FolderLock::~FolderLock() { release(); }

FolderLock::FolderLock(FolderLock&& other) noexcept
    : entry_(other.entry_), above_(std::move(other.above_)) {
  other.entry_ = -1;
  other.above_.clear();
}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    release();
    entry_ = other.entry_;
    above_ = std::move(other.above_);
    other.entry_ = -1;
    other.above_.clear();
  }
  return *this;
}

void FolderLock::release() noexcept {
  if (entry_ >= 0) unlock_entry(entry_);
  for (const int e : above_) unlock_entry(e);
  entry_ = -1;
  above_.clear();
}

}  // namespace course
