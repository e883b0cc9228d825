// figure_data_close COMMITTED DRAWN: exits 0 when two figure data files (a figure's .dat) show
// the same figure, and 1, listing the first differences, when they do not; 2 on bad usage.
//
// Used by the test figures_are_current (expect_figures_current.cmake): the committed copy in
// docs/figures was drawn on the course's machine, and another CPU or compiler computes the
// same figure with other last digits (Eigen's 8- or 16-lane exp and GEMM kernels round
// differently; chapter 09's trainings carry that through hundreds of steps). So the files
// agree when their text does, line by line (comments, titles, labels, blank lines and the
// number of fields), and their numbers do within what a figure can show:
//
//   |committed - drawn| <= 1e-3 * max(|committed|, span of its column)
//
// where a column's span is max - min of that field over the committed file. A figure is at
// most ~1000 px across, so a thousandth of the span is under a pixel on a linear axis, and a
// relative thousandth is under a pixel on a log axis (a decade takes at least 100 px); the
// colour of a heat map cell has 256 levels. A changed formula, seed or knob moves numbers by
// far more, which is what this test is for.
//
// figure_data_close --amplified COMMITTED DRAWN: for a figure whose numbers another CPU moves
// by more than a pixel, because they are made of its rounding. Chapter 09's trainings carry a
// last-digit difference through hundreds of steps (measured: AVX-512 against the AVX2 copy,
// a reversal accuracy of 0.795 for 0.95 at one step, a snapshot weight of 0.34 for 0.02), and
// its gradient check plots rounding errors themselves (1e-10 here, 4e-8 there, all under its
// bar). There the text must agree exactly, and so must every whole number (the steps, the
// positions, the layer numbers: what a changed knob moves), while every other number need only
// be finite where the committed one is and lie within its column's committed range widened by
// the span on either side, and, for a column of positive numbers (drawn on a log axis, as the
// gradient check's are), by a decade on either side (SSE2's worst error there is 1.1e-7, the
// AVX2 copy's 5.5e-8). (A whole number is one of a column whose every committed value is
// whole: an accuracy column that reaches 1 is not one.) What the trainings reach is checked
// by chapter 09's tests, and the gradient check's bar by its own.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr double kShows = 1e-3;  // the fraction of a column's span, or of a value, shown
constexpr int kMaxListed = 5;

std::vector<std::string> read_lines(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "figure_data_close: cannot read " << path << "\n";
    std::exit(2);
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool is_data(const std::string& line) {
  const auto first = line.find_first_not_of(" \t");
  return first != std::string::npos && line[first] != '#';
}

std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// The number a whole field spells, if it is one ("nan" and "inf" included, as gnuplot reads
// them); a label such as "id 5" or "<pad>" is not.
std::optional<double> number(const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end == field.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::string str(double v) {
  std::ostringstream out;
  out.precision(3);
  out << v;
  return out.str();
}

bool is_whole(double v) { return std::isfinite(v) && std::abs(v) < 1e9 && v == std::floor(v); }

bool agree(double a, double b, double span) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= kShows * std::max(std::abs(a), span);
}

// --amplified: a number of a whole column exactly; any other within the column's range, widened.
bool agree_amplified(double a, double b, std::pair<double, double> range, bool whole_column) {
  if (!std::isfinite(a) || !std::isfinite(b)) return agree(a, b, 0);
  if (whole_column) return a == b;
  const double span = range.second - range.first;
  double low = range.first - span, high = range.second + span;
  if (range.first > 0) {  // a log axis shows decades
    low = std::min(low, range.first / 10);
    high = std::max(high, range.second * 10);
  }
  return b >= low && b <= high;
}

}  // namespace

int main(int argc, char** argv) {
  const bool amplified = argc == 4 && std::string(argv[1]) == "--amplified";
  if (argc != 3 && !amplified) {
    std::cerr << "usage: figure_data_close [--amplified] COMMITTED.dat DRAWN.dat\n";
    return 2;
  }
  const auto committed = read_lines(argv[argc - 2]);
  const auto drawn = read_lines(argv[argc - 1]);

  // Each numeric column's range over the committed file (column = field index), and whether
  // its every value is a whole number.
  std::map<std::size_t, std::pair<double, double>> range;
  std::map<std::size_t, bool> whole;
  for (const auto& line : committed) {
    if (!is_data(line)) continue;
    const auto f = fields(line);
    for (std::size_t c = 0; c < f.size(); ++c) {
      const auto v = number(f[c]);
      if (!v || !std::isfinite(*v)) continue;
      whole.try_emplace(c, true).first->second &= is_whole(*v);
      auto [it, fresh] = range.try_emplace(c, *v, *v);
      if (!fresh) it->second = {std::min(it->second.first, *v), std::max(it->second.second, *v)};
    }
  }

  int problems = 0;
  auto report = [&](std::size_t line_no, const std::string& what) {
    if (++problems <= kMaxListed) std::cout << "  line " << line_no << ": " << what << "\n";
  };
  if (committed.size() != drawn.size()) {
    report(std::min(committed.size(), drawn.size()) + 1,
           std::to_string(committed.size()) + " lines committed, " + std::to_string(drawn.size()) +
               " drawn");
  }
  double worst = 0;  // the largest difference, in units of its tolerance
  for (std::size_t i = 0; i < std::min(committed.size(), drawn.size()); ++i) {
    const std::string& a = committed[i];
    const std::string& b = drawn[i];
    if (!is_data(a) || !is_data(b)) {
      if (a != b) report(i + 1, "text differs: '" + a + "' against '" + b + "'");
      continue;
    }
    const auto fa = fields(a), fb = fields(b);
    if (fa.size() != fb.size()) {
      report(i + 1, "fields differ: '" + a + "' against '" + b + "'");
      continue;
    }
    for (std::size_t c = 0; c < fa.size(); ++c) {
      const auto va = number(fa[c]), vb = number(fb[c]);
      if (!va || !vb) {
        if (fa[c] != fb[c]) report(i + 1, "'" + fa[c] + "' against '" + fb[c] + "'");
        continue;
      }
      const auto r = range.find(c);
      const std::pair<double, double> column = r == range.end() ? std::pair{*va, *va} : r->second;
      const double span = column.second - column.first;
      if (amplified) {
        const bool whole_column = whole.count(c) != 0 && whole.at(c);
        if (!agree_amplified(*va, *vb, column, whole_column)) {
          report(i + 1, "column " + std::to_string(c + 1) + ": " + fa[c] + " against " + fb[c] +
                            (whole_column ? " (a column of whole numbers: the same on every CPU)"
                                          : " (outside the column's range, widened)"));
        }
        continue;
      }
      if (!agree(*va, *vb, span)) {
        report(i + 1, "column " + std::to_string(c + 1) + ": " + fa[c] + " against " + fb[c] +
                          " (a figure shows differences above " +
                          str(kShows * std::max(std::abs(*va), span)) + ")");
      } else if (std::isfinite(*va) && std::isfinite(*vb) && *va != *vb) {
        worst = std::max(worst, std::abs(*va - *vb) / (kShows * std::max(std::abs(*va), span)));
      }
    }
  }
  if (problems > kMaxListed) std::cout << "  and " << problems - kMaxListed << " more\n";
  if (problems == 0 && amplified) {
    std::printf("the same figure: its text and whole numbers, its other numbers in range\n");
  } else if (problems == 0) {
    std::printf("the same figure (largest difference %.3g of what it would show)\n", worst);
  }
  return problems == 0 ? 0 : 1;
}
