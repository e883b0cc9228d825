// machine.hpp: what a table of measurements records about where and when it was taken.
#pragma once

#include <string>

namespace course {

/// The CPU's model name from /proc/cpuinfo ("AMD EPYC 9654 96-Core Processor"), or
/// "unknown CPU" where the system does not say (aarch64 kernels often leave it out).
std::string cpu_model();

/// Today's date in UTC, "2026-11-27".
std::string today_utc();

}  // namespace course
