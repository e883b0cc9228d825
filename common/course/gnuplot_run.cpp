// gnuplot_run.cpp: a figure's .dat and .gp written atomically, and gnuplot run on them in the
// output folder as a child process (no shell), its PNG checked whole before it is kept.
#include "course/plot.hpp"

#include "course/files.hpp"
#include "course/interrupt.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // the process environment, handed on to gnuplot

namespace course {

namespace {

// ---- Running gnuplot ----------------------------------------------------------------------------

struct RunResult {
  bool found = true;  // false: no such program, or not executable (nothing ran)
  int status = 0;     // exit code, or 128 + signal number
  std::string out;    // everything the program wrote to stdout (the PNG)
  std::string err;    // everything it wrote to stderr
};

// Reads both pipes until the program closes them. Both at once (poll), because a program
// that fills one pipe while we wait on the other would block for ever.
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open_pipes = 2;
  char buf[65536];
  while (open_pipes > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("Plotter: poll failed: ") + std::strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // closed (or broken): poll ignores a negative fd
        --open_pipes;
      }
    }
  }
}

// Runs `program args...` in `dir`, stdin on /dev/null, stdout and stderr captured. posix_spawnp
// looks the program up on PATH as execvp does (a name with '/' is used as it is) and reports a
// failed exec as its return value; no shell is involved, so names are never parsed as syntax.
// While it runs, a SIGINT/SIGTERM/SIGHUP to the course stops it too (course/interrupt.hpp).
RunResult run_in(const std::string& program, const std::vector<std::string>& args,
                 const std::filesystem::path& dir) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("Plotter: pipe failed: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error(std::string("Plotter: pipe failed: ") + std::strerror(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());  // glibc 2.29+
  // The child starts with no signal held (ours are held while it starts; see below). Its
  // dispositions are as the user left them: exec resets the course's handlers to the default,
  // and a signal the user ignored (nohup's SIGHUP) stays ignored in gnuplot too. The one the
  // course ignores itself, SIGPIPE (interrupt::ignore_broken_pipe), is set back to its default.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  const sigset_t defaults = interrupt::child_defaults();
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  int spawned = 0;
  std::optional<interrupt::StopOnSignal> stop_child;
  {
    // Started and registered, or neither: a signal in between would orphan the child.
    const interrupt::HoldSignals hold;
    spawned = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
    if (spawned == 0) stop_child.emplace(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    if (spawned == ENOENT || spawned == EACCES || spawned == ENOTDIR) return {false, 127, {}, {}};
    throw std::runtime_error("Plotter: cannot run " + program + " in " + dir.string() + ": " +
                             std::strerror(spawned));
  }
  RunResult result;
  try {
    drain(out_pipe[0], err_pipe[0], result.out, result.err);
  } catch (...) {  // poll failed or the output did not fit in memory: stop gnuplot, reap it
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::kill(pid, SIGKILL);
    const interrupt::HoldSignals hold;
    stop_child.reset();
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  // Wait for the exit without reaping (WNOWAIT): until it is reaped the pid cannot be reused,
  // so a signal meanwhile can still kill exactly this child. Then unregister it with signals
  // held, and only then reap it.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0) {
    if (errno != EINTR) throw std::runtime_error("Plotter: waitid failed");
  }
  int status = 0;
  {
    const interrupt::HoldSignals hold;
    stop_child.reset();
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) throw std::runtime_error("Plotter: waitpid failed");
    }
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Whether `bytes` is a whole PNG file: the 8-byte signature first and the IEND chunk last
// (length 0, type "IEND", its CRC). gnuplot exits 0 even when its output was cut short, so
// the course checks what it wrote, not only how it exited.
bool is_complete_png(std::string_view bytes) {
  constexpr std::string_view signature("\x89PNG\r\n\x1a\n", 8);
  constexpr std::string_view iend("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  return bytes.size() >= signature.size() + iend.size() && bytes.substr(0, 8) == signature &&
         bytes.substr(bytes.size() - iend.size()) == iend;
}

// How the printed hint names the folder: as is when the shell would read it unchanged,
// otherwise in single quotes.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+:,=@%", c);
  });
  if (plain) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

// ---- Plotter ------------------------------------------------------------------------------------

Plotter::Plotter(std::filesystem::path out_dir, bool enabled, std::string gnuplot)
    : out_dir_(std::move(out_dir)), enabled_(enabled), gnuplot_(std::move(gnuplot)) {}

bool Plotter::gnuplot_available() {
  static const bool available = run_in("gnuplot", {"--version"}, ".").found;  // asked once
  return available;
}

Figure Plotter::render(const std::string& name, const std::string& script,
                       const std::string& data) {
  Figure fig;
  if (!enabled_) return fig;
  fig.png = out_dir_ / (name + ".png");
  fig.gp = out_dir_ / (name + ".gp");
  fig.dat = out_dir_ / (name + ".dat");
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec)
    throw std::runtime_error("Plotter: cannot create " + out_dir_.string() + ": " + ec.message());
  write_file_atomically(fig.dat, data);
  write_file_atomically(fig.gp, script);

  const RunResult r = run_in(gnuplot_, {"-e", "to_stdout=1", name + ".gp"}, out_dir_);
  if (!r.found) {
    std::cout << "plot: gnuplot not found; render with: cd " << shell_word(out_dir_.string())
              << " && gnuplot " << name << ".gp\n";
    return fig;
  }
  std::string said = r.err;  // gnuplot's own words, without the final newline
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  if (r.status != 0) {
    throw std::runtime_error("Plotter: " + gnuplot_ + " failed on " + fig.gp.string() +
                             " (exit status " + std::to_string(r.status) + ")" +
                             (said.empty() ? std::string() : ": " + said));
  }
  if (!is_complete_png(r.out)) {
    throw std::runtime_error("Plotter: " + gnuplot_ + " exited 0 on " + fig.gp.string() +
                             " but wrote no whole PNG (" + std::to_string(r.out.size()) +
                             " bytes, no IEND chunk at the end)" +
                             (said.empty() ? std::string() : ": " + said));
  }
  write_file_atomically(fig.png, r.out);
  fig.rendered = true;
  rendered_.push_back(fig.png);
  return fig;
}

std::string Plotter::summary() const {
  std::string s;
  for (std::size_t i = 0; i < rendered_.size(); ++i) {
    s += (i == 0 ? (rendered_.size() == 1 ? "  figure: " : "  figures: ") : "           ") +
         rendered_[i].string() + "\n";
  }
  return s;
}

}  // namespace course
