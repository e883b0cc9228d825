// interrupt.cpp: on SIGINT, SIGTERM or SIGHUP, stop the child, remove the temporaries, and
// die by the same signal.
#include "course/interrupt.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>

namespace course::interrupt {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ};
constexpr int kSlots = 16;

// The registry the handler reads. A slot's path is written completely before `used` is set,
// and `used` is cleared before the path may change, so the handler never reads half a path.
struct Slot {
  char path[PATH_MAX];
  volatile sig_atomic_t used;
  volatile sig_atomic_t folder;  // a folder whose files go too, then the folder itself
};
std::array<Slot, kSlots> g_slots{};
volatile sig_atomic_t g_child = 0;  // pid of the child to stop, 0 when none
bool g_ignoring_sigpipe = false;    // ignore_broken_pipe() set SIGPIPE to ignored

// The files directly in `path`, then the folder: with system calls only (getdents64 where
// opendir and readdir would allocate), as a signal handler must.
void remove_folder(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  alignas(8) char buffer[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      // struct linux_dirent64: inode (8), offset (8), record length (2), type (1), name.
      unsigned short length = 0;
      std::memcpy(&length, buffer + at + 16, sizeof length);
      const char* name = buffer + at + 19;
      const bool dots = name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
      if (!dots) ::unlinkat(fd, name, 0);
      at += length;
    }
  }
  ::close(fd);
  ::rmdir(path);
}

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;
  if (const pid_t child = static_cast<pid_t>(g_child); child > 0) {
    ::kill(child, SIGKILL);  // gnuplot holds no state worth a graceful stop
    ::waitpid(child, nullptr, 0);
  }
  for (Slot& s : g_slots) {
    if (s.used && !s.folder) ::unlink(s.path);
  }
  for (Slot& s : g_slots) {
    if (s.used && s.folder) remove_folder(s.path);
  }
  // Die by the signal itself: restore the default action and raise it again. It is delivered
  // as soon as this handler returns (the signal is blocked while the handler runs).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  errno = saved_errno;
}

}  // namespace

void install() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigfillset(&sa.sa_mask);  // nothing else runs in the middle of the clean-up
  for (const int sig : kSignals) {
    // A signal the caller chose to ignore (nohup sets SIGHUP to ignored) stays ignored.
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

void ignore_broken_pipe() {
  struct sigaction old {};
  ::sigaction(SIGPIPE, nullptr, &old);
  if (old.sa_handler == SIG_IGN) return;  // the caller's choice, or ours from an earlier call
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigemptyset(&ignore.sa_mask);
  if (::sigaction(SIGPIPE, &ignore, nullptr) == 0) g_ignoring_sigpipe = true;
}

sigset_t child_defaults() {
  sigset_t set;
  ::sigemptyset(&set);
  if (g_ignoring_sigpipe) ::sigaddset(&set, SIGPIPE);
  return set;
}

namespace {

// Fills a free slot with `path`; its index.
int register_path(const std::filesystem::path& path, bool folder) {
  const std::string& p = path.native();
  if (p.size() >= PATH_MAX)
    throw std::runtime_error("interrupt: path too long to register: " + p.substr(0, 200));
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[static_cast<std::size_t>(i)];
    if (s.used) continue;
    std::memcpy(s.path, p.c_str(), p.size() + 1);
    s.folder = folder ? 1 : 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the path before the flag
    s.used = 1;
    return i;
  }
  throw std::runtime_error("interrupt: more than 16 temporary files at once");
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(const std::filesystem::path& path)
    : slot_(register_path(path, false)) {}

RemoveOnSignal::~RemoveOnSignal() { g_slots[static_cast<std::size_t>(slot_)].used = 0; }

RemoveFolderOnSignal::RemoveFolderOnSignal(const std::filesystem::path& path)
    : slot_(register_path(path, true)) {}

RemoveFolderOnSignal::~RemoveFolderOnSignal() { g_slots[static_cast<std::size_t>(slot_)].used = 0; }

StopOnSignal::StopOnSignal(pid_t child) { g_child = child; }

StopOnSignal::~StopOnSignal() { g_child = 0; }

HoldSignals::HoldSignals() {
  sigset_t hold;
  ::sigemptyset(&hold);
  for (const int sig : kSignals) ::sigaddset(&hold, sig);
  ::pthread_sigmask(SIG_BLOCK, &hold, &saved_);
}

HoldSignals::~HoldSignals() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

}  // namespace course::interrupt
