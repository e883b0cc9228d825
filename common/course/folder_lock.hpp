/// @file
/// One writer per folder: a lock that keeps two runs from mixing their files in one dump or
/// checkpoint folder.
///
///     course::FolderLock lock(dir, course::FolderLock::Mode::write);  // or FolderBusy
///
/// A folder written by a run (--dump DIR, chapter 09's --save DIR) is locked for writing from
/// the moment the command line is accepted until the program ends; a checkpoint being read
/// (--load) is locked for reading while it is read. The lock is flock(2) on the folder itself,
/// so no lock file is left behind, and the system drops it when the process ends however it
/// ends (a crash or `kill -9` included). Any number of readers may hold a folder at once, or
/// one writer; a second writer, or a reader while a writer holds it, is refused at once
/// (FolderBusy): the course never waits for another run, which may be paused for good.
///
/// A writer also holds every folder above its own for reading, up to the root: a run writing
/// `s` and a run writing `s/reversal` exclude each other whichever starts first, while runs
/// writing two folders side by side (`s/a`, `s/b`) do not.
///
/// Within one process the locks are counted, not stacked: a run that holds a folder for
/// writing may lock it again, for writing or for reading (chapter 09 loads a checkpoint from the
/// folder it will save into), and the folder stays locked until the last FolderLock on it ends.
/// Two folders are the same when they are the same directory (device and inode), whatever
/// the path says (a link, "a/../a").
///
/// flock works on local file systems and on NFS (where Linux maps it to a POSIX lock); on a
/// file system without locks at all, locking fails with the system's reason (FolderBusy too).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace course {

/// A folder is locked by another run (or cannot be locked). what(): "<folder> is being written
/// by another run of the course: ...", ready to print as a usage error or a failure.
class FolderBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FolderLock {
 public:
  enum class Mode {
    read,   ///< shared: other readers may hold it too
    write,  ///< exclusive: no other run may read or write the folder
  };

  /// No folder: a lock that holds nothing.
  FolderLock() = default;
  /// Locks the existing folder `dir` in `mode` (for writing: the folders above it too, for
  /// reading), without waiting. Throws FolderBusy when another process holds one of them in a
  /// mode that excludes this one, std::invalid_argument when `dir` is not an existing folder
  /// this process may open.
  FolderLock(const std::filesystem::path& dir, Mode mode);
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  /// Whether this object holds a lock.
  bool held() const { return entry_ >= 0; }

 private:
  void release() noexcept;
  int entry_ = -1;          ///< index into the process's table of locked folders
  std::vector<int> above_;  ///< a writer's: the folders above it, held for reading
};

}  // namespace course
