/// @file
/// An interrupted chapter leaves nothing half-made behind.
///
/// Ctrl-C (SIGINT), `kill` (SIGTERM), a closed terminal (SIGHUP), Ctrl-\ (SIGQUIT) or a file
/// size limit (SIGXFSZ, from `ulimit -f`) can arrive at any moment,
/// also while gnuplot renders a figure or a dump is being written. Once install() has run
/// (course::Chapter::run does it), such a signal:
///   1. stops the child process of the moment (gnuplot), so it does not run on, orphaned;
///   2. removes every temporary file still registered, so no "<name>.tmp" litter is left;
///   3. ends the program by the same signal, as if it had not been caught, so the shell
///      reports it as usual: exit status 128 + the signal number (130 for Ctrl-C).
///
/// A file that was already complete stays: it was renamed into place whole (course::AtomicFile).
/// A dump that was interrupted has no manifest.json, which is how readers tell it is incomplete.
///
/// The handler does only what is async-signal-safe (unlink, kill, waitpid, raise): the registry
/// is a fixed table of path buffers, filled and cleared outside the handler. It is meant for
/// the one thread that writes a chapter's output.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <filesystem>

namespace course::interrupt {

/// Installs the handler for SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGXFSZ (a signal the caller
/// ignores stays ignored). Safe to call more than once.
void install();

/// Makes a write to a closed pipe fail with EPIPE instead of ending the program by SIGPIPE, so
/// that `chapter | head` ends as any lost output does: "<chapter>: write error: Broken pipe" on
/// stderr, exit code 1, the temporaries removed and an unfinished dump left without its
/// manifest. (By default SIGPIPE ends the program at once, exit status 141, without a word.)
/// A SIGPIPE the caller ignored already stays ignored. Safe to call more than once.
void ignore_broken_pipe();

/// The signals a child process must start with at their default action: SIGPIPE when
/// ignore_broken_pipe() is what ignores it, since a program such as gnuplot expects to be
/// stopped by it (an ignored signal stays ignored across exec); none otherwise.
sigset_t child_defaults();

/// Registers a temporary file for removal on a signal, for as long as this object lives.
/// Throws std::runtime_error when the path is too long for the table or the table is full
/// (16 files at once; the course never has more than three).
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::filesystem::path& path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  int slot_;
};

/// Registers a folder of temporary files (a dump being staged, course/dump.hpp) for removal on
/// a signal, with the files directly in it, for as long as this object lives. It takes a slot
/// of the same table as RemoveOnSignal.
class RemoveFolderOnSignal {
 public:
  explicit RemoveFolderOnSignal(const std::filesystem::path& path);
  ~RemoveFolderOnSignal();
  RemoveFolderOnSignal(const RemoveFolderOnSignal&) = delete;
  RemoveFolderOnSignal& operator=(const RemoveFolderOnSignal&) = delete;

 private:
  int slot_;
};

/// Registers a child process to be killed on a signal, for as long as this object lives.
class StopOnSignal {
 public:
  explicit StopOnSignal(pid_t child);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

/// Holds those signals back while it lives (they are delivered when it ends), so
/// that starting a child and registering it cannot be split by a signal.
class HoldSignals {
 public:
  HoldSignals();
  ~HoldSignals();
  HoldSignals(const HoldSignals&) = delete;
  HoldSignals& operator=(const HoldSignals&) = delete;

 private:
  sigset_t saved_;  // the mask before, restored at the end
};

}  // namespace course::interrupt
