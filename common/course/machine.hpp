// machine.hpp: what a table of measurements records about where and when it was taken.
#pragma once

#include <filesystem>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

namespace course {

/// The CPU's model name from /proc/cpuinfo ("AMD EPYC 9654 96-Core Processor"), or
/// "unknown CPU" where the system does not say (aarch64 kernels often leave it out).
std::string cpu_model();

/// Today's date in UTC, "2026-11-27".
std::string today_utc();

/// Where and when a table of measurements was taken.
struct TakenOn {
  std::string machine, date;
};

/// Reads a table of measurements, a chapter's measured.tsv: a title line "# <title>: <machine>,
/// <date>" (the machine's name may hold commas: the date follows the last ", "), then one
/// measurement per line, "<kind>\t<value>\t...", where blank lines and other lines starting
/// '#' are comments. Each measurement goes to `row` as its kind and a stream of the rest of the
/// line; `row` returns false when it cannot read the line. Returns std::nullopt when the file
/// does not open; throws std::runtime_error naming "<path>:<line>" and the line for a line
/// `row` refused or a title line without a date, and naming the path when the title is missing.
std::optional<TakenOn> read_measurement_table(
    const std::filesystem::path& path, std::string_view title,
    const std::function<bool(const std::string& kind, std::istream& rest)>& row);

}  // namespace course
