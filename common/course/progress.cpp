// progress.cpp: a training progress line, redrawn on a terminal, periodic in a log.
#include "course/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <ostream>
#include <utility>

namespace course {

ProgressLine::ProgressLine(std::string task, std::int64_t total_steps, std::ostream& err,
                           bool terminal, std::int64_t every)
    : task_(std::move(task)),
      total_(total_steps),
      every_(every < 1 ? 1 : every),
      err_(err),
      terminal_(terminal) {}

void ProgressLine::update(std::int64_t step, double loss, double accuracy,
                          double tokens_per_second) {
  const bool last = step >= total_;
  if (!terminal_ && step % every_ != 0 && !last) return;
  const int width = static_cast<int>(fmt::format("{}", total_).size());
  const std::string line =
      fmt::format("training: {}  step {:>{}}/{}  loss {:.4f}  accuracy {:.3f}  {} tokens/s", task_,
                  step, width, total_, loss, accuracy, short_count(tokens_per_second));
  if (terminal_) {
    err_ << '\r' << line << "\033[K" << std::flush;  // \033[K clears what a longer line left
    open_line_ = true;
  } else {
    err_ << line << '\n' << std::flush;
  }
}

void ProgressLine::finish(const std::string& summary) {
  if (open_line_) err_ << '\n';
  open_line_ = false;
  err_ << "training: " << summary << '\n' << std::flush;
}

bool ProgressLine::is_terminal() { return isatty(STDERR_FILENO) == 1; }

std::string short_count(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace course
