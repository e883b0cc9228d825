/// @file
/// Writing a file so that its final name only ever holds all of it.
///
/// Every file the course writes (figures, their .dat and .gp, .npy dumps, a dump's manifest)
/// goes through AtomicFile:
///   - the bytes go to a temporary file beside the final one, "<name>.<pid>-<n>.tmp": unique
///     per process and per file, so two runs writing the same folder at once never share one;
///   - it is created with O_CREAT | O_EXCL | O_NOFOLLOW, so a file or symbolic link already
///     placed under that name is never opened, let alone followed (the next n is tried);
///   - every write(2) and the final close(2) is checked, and a failure throws WriteError
///     naming the file and the system's reason ("No space left on device");
///   - commit() renames the finished file into place; until then, and when anything fails,
///     the final name keeps what it held before (or nothing), and the temporary is removed,
///     also when the program is interrupted (course/interrupt.hpp).
#pragma once

#include "course/interrupt.hpp"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace course {

/// A file could not be written. what(): "cannot write <path>: <reason>".
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicFile {
 public:
  /// Opens the temporary file for `path`. Throws WriteError when it cannot be created.
  explicit AtomicFile(std::filesystem::path path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends bytes (all of them, or WriteError).
  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Closes the file (a failed close is a failed write) and renames it to its final name.
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temporary() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);

  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::unique_ptr<interrupt::RemoveOnSignal> on_signal_;
};

/// The whole of `bytes` into `path`, through an AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

/// What a stat(2) st_mode is, in words: "a regular file", "a FIFO", "a folder", "a socket",
/// "a symbolic link" or "a device", for a message that says why a file was not read.
std::string file_kind(unsigned mode);

/// The contents of the regular file `path` (a link to one is followed), at most `max_bytes` of
/// them. Anything else is refused before a byte is read, and without waiting: a FIFO, which
/// would block the reader until someone writes into it, a device, a folder. Throws
/// std::runtime_error: "<path>: not a regular file (a FIFO)", "<path>: cannot read (<reason>)",
/// "<path>: larger than <max_bytes> bytes".
std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace course
