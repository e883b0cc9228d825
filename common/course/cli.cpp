// cli.cpp: the shared chapter options, and turning every parse problem into exit code 2.
#include "course/cli.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>

namespace course {

namespace {

// Creates `dir` if needed and proves a file can be written there, so a bad --out or --dump
// is reported before the chapter does any work rather than halfway through it.
std::string check_writable_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create folder " + dir.string() + ": " + ec.message();
  if (!std::filesystem::is_directory(dir, ec)) return dir.string() + " is not a folder";
  const std::filesystem::path probe = dir / ".attn_write_probe";
  {
    std::ofstream f(probe);
    if (!f || !(f << "probe")) return "cannot write into folder " + dir.string();
  }
  std::filesystem::remove(probe, ec);
  return {};
}

}  // namespace

std::filesystem::path default_plots_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);  // Linux: the running binary
  if (!ec) {
    for (fs::path dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "chapters", ec) && fs::is_directory(dir / "plots", ec)) {
        return dir / "plots";
      }
    }
  }
  return "plots";
}

CLI::Validator finite_range(double lo, double hi) {
  const std::string range =
      "[" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](const std::string& text) {
        double v = 0.0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        if (std::isnan(v) || v < lo || v > hi) return text + " is not a number in " + range;
        return std::string();
      },
      "FLOAT in " + range);
}

ChapterCli::ChapterCli(std::string name, std::string about, std::uint64_t default_seed)
    : app_(std::move(about), std::move(name)) {
  opts_.seed = default_seed;
  opts_.out_dir = default_plots_dir();
  // CLI11 would read "-1" into the unsigned seed as 2^64 - 1 and clamp 2^70 to 2^64 - 1, so
  // a typo would run with a seed nobody asked for: accept only what fits, digit for digit.
  app_.add_option("--seed", opts_.seed, "Random seed (the same seed prints the same numbers)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& text) {
            std::uint64_t v = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            const bool whole = ec == std::errc() && end == text.data() + text.size();
            return whole ? std::string()
                         : "the seed must be a whole number from 0 to 2^64 - 1, got " + text;
          },
          ""));
  app_.add_option("--out", opts_.out_dir, "Folder for the figures (.png, .gp, .dat)")
      ->capture_default_str();
  app_.add_flag("--no-plots", opts_.no_plots, "Draw no figures");
  app_.add_option("--dump", opts_.dump_dir,
                  "Write the chapter's named intermediates as .npy files into this folder");
}

std::optional<int> ChapterCli::parse(int argc, char** argv) {
  const auto usage_error = [this](const std::string& message) {
    std::cerr << app_.get_name() << ": " << message << "\n\n" << app_.help();
    return 2;
  };
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app_.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app_.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  for (const auto& rule : rules_) {
    if (std::string problem = rule(); !problem.empty()) return usage_error(problem);
  }
  if (!opts_.no_plots) {
    if (auto problem = check_writable_dir(opts_.out_dir); !problem.empty()) {
      return usage_error("--out: " + problem);
    }
  }
  if (!opts_.dump_dir.empty()) {
    if (auto problem = check_writable_dir(opts_.dump_dir); !problem.empty()) {
      return usage_error("--dump: " + problem);
    }
  }
  return std::nullopt;
}

Plotter ChapterCli::plotter() const { return Plotter(opts_.out_dir, !opts_.no_plots); }

Dumper ChapterCli::dumper() const { return Dumper(opts_.dump_dir); }

}  // namespace course
