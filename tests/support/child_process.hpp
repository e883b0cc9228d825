// child_process.hpp: running a piece of a test in a process of its own.
//
// What a signal, a resource limit or another process's lock does is tested in a child, never
// in the test runner: the child reports through its exit code.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace attn_test {

/// Runs `body` (returning an int) in a forked child and returns how the child ended: its exit
/// code, or 128 + the signal that ended it.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) std::_Exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The same, but a child still running after `seconds` is killed and -1 returned: for a test
/// whose failure would be a hang (a FIFO opened for reading waits for a writer forever).
template <typename Body>
int in_child_within(double seconds, Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) std::_Exit(body());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace attn_test
