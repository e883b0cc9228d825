// files.cpp: a temporary file beside the final one, checked writes, a rename at the end.
#include "course/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace course {

namespace {

// Numbers the temporaries of this process: with the pid, a name no other writer uses.
std::atomic<unsigned> g_next_temporary{0};

std::string reason(int err) { return std::strerror(err); }

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  const std::string stem = path_.filename().string() + "." + std::to_string(::getpid()) + "-";
  // A name taken (by a stale temporary of a dead process with our pid, or by a planted link)
  // is skipped, never opened: O_EXCL fails on any existing entry, O_NOFOLLOW on a final link.
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp_ = path_.parent_path() / (stem + std::to_string(g_next_temporary++) + ".tmp");
    const interrupt::HoldSignals hold;  // created and registered, or neither
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      try {
        on_signal_ = std::make_unique<interrupt::RemoveOnSignal>(tmp_);
      } catch (...) {  // the destructor does not run for a constructor that throws
        ::close(fd_);
        ::unlink(tmp_.c_str());
        throw;
      }
      return;
    }
    if (errno != EEXIST) {
      const int err = errno;
      throw WriteError("cannot write " + path_.string() + ": " + reason(err) + " (creating " +
                       tmp_.filename().string() + ")");
    }
  }
  throw WriteError("cannot write " + path_.string() + ": 100 temporary names beside it are taken");
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  on_signal_.reset();
  committed_ = true;  // nothing left for the destructor to do
  throw WriteError(what + ": " + reason(err));
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw WriteError("cannot write " + path_.string() + ": the file is closed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      fail("cannot write " + path_.string(), err);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw WriteError("cannot write " + path_.string() + ": the file is closed");
  // Some file systems (NFS, quotas) report a write that did not fit only when it is closed.
  const int closed = ::close(fd_), close_err = errno;
  fd_ = -1;
  if (closed != 0) fail("cannot write " + path_.string(), close_err);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    fail("cannot move " + tmp_.string() + " to " + path_.string(), err);
  }
  committed_ = true;
  on_signal_.reset();
}

std::string file_kind(unsigned mode) {
  return S_ISREG(mode)    ? "a regular file"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISDIR(mode)  ? "a folder"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISLNK(mode)  ? "a symbolic link"
                          : "a device";
}

std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes) {
  const std::string what = path.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked before reading.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(what + ": cannot read (" + reason(err) + ")");
  }
  struct stat st {};
  std::string text;
  const auto fail = [&](const std::string& problem) {
    ::close(fd);
    throw std::runtime_error(what + ": " + problem);
  };
  if (::fstat(fd, &st) != 0) fail("cannot read (" + reason(errno) + ")");
  if (!S_ISREG(st.st_mode)) fail("not a regular file (" + file_kind(st.st_mode) + ")");
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    fail("larger than " + std::to_string(max_bytes) + " bytes");
  }
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read (" + reason(errno) + ")");
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) fail("larger than " + std::to_string(max_bytes) + " bytes");
  }
  ::close(fd);
  return text;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

}  // namespace course
