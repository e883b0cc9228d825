// machine.cpp: the CPU's name and today's date, for the chapters' measurement tables, and
// the reading of those tables.
#include "course/machine.hpp"

#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace course {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

std::optional<TakenOn> read_measurement_table(
    const std::filesystem::path& path, std::string_view title,
    const std::function<bool(const std::string& kind, std::istream& rest)>& row) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  const std::string head = fmt::format("# {}: ", title);
  std::optional<TakenOn> taken;
  int number = 0;
  for (std::string line; std::getline(file, line);) {
    ++number;
    const auto bad = [&] {
      return std::runtime_error(
          fmt::format("{}:{}: cannot read '{}'", path.string(), number, line));
    };
    if (line.starts_with(head)) {
      const std::string rest = line.substr(head.size());
      const auto comma = rest.rfind(", ");
      if (comma == std::string::npos) throw bad();
      taken = TakenOn{rest.substr(0, comma), rest.substr(comma + 2)};
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind) || !row(kind, in)) throw bad();
  }
  if (!taken) {
    throw std::runtime_error(
        fmt::format("{}: no title line '{}<machine>, <date>'", path.string(), head));
  }
  return taken;
}

}  // namespace course
