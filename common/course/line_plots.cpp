// line_plots.cpp: histograms and line plots as .dat, .gp and .png, and curves made from
// Eigen vectors.
#include "course/plot.hpp"

#include "course/detail/gnuplot_script.hpp"

#include <limits>

namespace course {

using namespace plot_detail;

// ---- Histograms ---------------------------------------------------------------------------------

Figure Plotter::histograms(const std::string& name, const std::vector<HistogramPanel>& panels,
                           const HistogramOptions& opts) {
  constexpr std::string_view where = "histograms";
  check_name(where, name);
  if (panels.empty()) invalid(where, "no panels");
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  for (std::size_t k = 0; k < panels.size(); ++k) {
    const HistogramPanel& p = panels[k];
    if (p.bins < 1 || p.bins > 10000)
      invalid(where, "panel " + std::to_string(k) + ": bins must be in [1, 10000], got " +
                         std::to_string(p.bins));
    if (std::none_of(p.values.begin(), p.values.end(), [](double v) { return std::isfinite(v); }))
      invalid(where, "panel " + std::to_string(k) + " has no finite values (" +
                         std::to_string(p.values.size()) + " samples)");
    if (!std::isfinite(p.top_per_x))
      invalid(where,
              "panel " + std::to_string(k) + ": top_per_x must be finite, got " + num(p.top_per_x));
  }
  if (!enabled_) return {};

  const int n = static_cast<int>(panels.size());
  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " histograms, one block each\n";
  dat += "# bin_centre count bin_width   (computed in C++; the last bin includes the maximum)\n";
  std::string s =
      script_head(name, std::to_string(n) + " histogram" + (n > 1 ? "s" : "") + " side by side",
                  "one block per panel (gnuplot's `index k`), one line per bin: "
                  "centre, count, width",
                  opts.width_px, opts.height_px);
  s += section("Style");
  s += "# Bars are counts computed by the C++ code (not gnuplot's `smooth frequency`), drawn as\n";
  s += "# boxes as wide as their bin, in viridis blue with thin white gaps between them.\n";
  s += "set style fill solid 1.0 border rgb \"white\"\n";
  s += "set grid ytics lc rgb \"#dddddd\"\n";
  s += "set tics out nomirror\n";
  s += "set border 3  # left and bottom only\n";
  s += "set ylabel \"count\"\n";
  s += "set yrange [0:*]\n";
  s += section("Panels");
  s += "set multiplot layout 1," + std::to_string(n);
  if (!opts.title.empty())
    s += " title " + quote(opts.title) + " font \"," + std::to_string(kTitleFont) + "\"";
  s += "\n";
  for (int k = 0; k < n; ++k) {
    const HistogramPanel& p = panels[static_cast<std::size_t>(k)];
    const Bins b = make_bins(p.values, p.bins);
    long long total = 0;
    for (const long long c : b.counts) total += c;
    dat += "\n\n# panel " + std::to_string(k) + ": " + one_line(p.title) + "\n";
    dat += "# " + std::to_string(total) + " finite samples in " + std::to_string(p.bins) +
           " bins from " + num(b.lo) + " in steps of " + num(b.width);
    dat += b.skipped ? "; " + std::to_string(b.skipped) + " non-finite samples skipped\n" : "\n";
    for (std::size_t i = 0; i < b.counts.size(); ++i)
      dat += num(b.lo + (static_cast<double>(i) + 0.5) * b.width) + " " +
             std::to_string(b.counts[i]) + " " + num(b.width) + "\n";

    s += "\n# Panel " + std::to_string(k) + ": " + one_line(p.title) + "\n";
    s += "set title " + quote(p.title) + "\n";
    s += "set xlabel " + quote(p.xlabel) + "\n";
    const double hi = b.lo + p.bins * b.width;
    s += "set xrange [" + num(b.lo) + ":" + num(hi) + "]\n";
    if (p.top_per_x != 0) {
      s += "# The top axis: the same bins read as x * " + num(p.top_per_x) + "\n";
      s += "set border 7  # and the top\n";
      s += "set x2range [" + num(b.lo * p.top_per_x) + ":" + num(hi * p.top_per_x) + "]\n";
      s += "set x2tics out nomirror\n";
      s += "set x2label " + quote(p.top_label) + "\n";
    }
    s += "plot datafile index " + std::to_string(k) +
         " using 1:2:3 with boxes fillcolor rgb \"#3b518b\" notitle\n";
    if (p.top_per_x != 0) s += "set border 3\nunset x2tics\nunset x2label\n";
  }
  s += "unset multiplot\n";
  return render(name, s, dat);
}

// ---- Curves from Eigen vectors ------------------------------------------------------------------

namespace {

void check_same_length(const char* where, const std::string& label, std::size_t nx,
                       std::size_t ny) {
  require(nx == ny, where, [&] {
    return "curve \"" + one_line(label) + "\" has " + std::to_string(nx) + " x but " +
           std::to_string(ny) + " y values";
  });
}

}  // namespace

Series curve(std::string label, std::vector<double> x, std::vector<double> y, CurveStyle style) {
  check_same_length("curve", label, x.size(), y.size());
  return {.label = std::move(label),
          .x = std::move(x),
          .y = std::move(y),
          .points = style.points,
          .dashed = style.dashed,
          .line = style.line,
          .right_axis = style.right_axis};
}

Series curve_for_log_y(std::string label, std::vector<double> x, std::vector<double> y,
                       CurveStyle style) {
  check_same_length("curve_for_log_y", label, x.size(), y.size());
  std::vector<double> xs, ys;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] <= 0.0)) xs.push_back(x[i]), ys.push_back(y[i]);  // NaN stays, for lines()
  }
  return curve(std::move(label), std::move(xs), std::move(ys), style);
}

// ---- Line plot ----------------------------------------------------------------------------------

Figure Plotter::lines(const std::string& name, const std::vector<Series>& series,
                      const LineOptions& opts) {
  constexpr std::string_view where = "lines";
  check_name(where, name);
  if (series.empty()) invalid(where, "no series");
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& sr = series[k];
    const std::string which = "series " + std::to_string(k) + " (\"" + one_line(sr.label) + "\")";
    if (sr.x.size() != sr.y.size())
      invalid(where, which + " has " + std::to_string(sr.x.size()) + " x but " +
                         std::to_string(sr.y.size()) + " y values");
    if (sr.x.empty()) invalid(where, which + " has no points");
    for (std::size_t i = 0; i < sr.x.size(); ++i) {
      if (!std::isfinite(sr.x[i]) || !std::isfinite(sr.y[i]))
        invalid(where, which + " point " + std::to_string(i) + " is not finite (" + num(sr.x[i]) +
                           ", " + num(sr.y[i]) + ")");
      if (opts.logx && sr.x[i] <= 0)
        invalid(where, which + " point " + std::to_string(i) + " has x = " + num(sr.x[i]) +
                           ", which a log x axis cannot show");
      if (opts.logy && !sr.right_axis && sr.y[i] <= 0)
        invalid(where, which + " point " + std::to_string(i) + " has y = " + num(sr.y[i]) +
                           ", which a log y axis cannot show");
    }
  }
  for (const auto& [x, label] : opts.xtics) {
    if (!std::isfinite(x))
      invalid(where, "the xtic \"" + one_line(label) + "\" is not at a finite x");
  }
  for (const auto& [y, label] : opts.hlines) {
    if (!std::isfinite(y) || (opts.logy && y <= 0))
      invalid(where, "the line \"" + one_line(label) + "\" is at y = " + num(y) +
                         ", which the y axis cannot show");
  }
  if (!enabled_) return {};

  const int n = static_cast<int>(series.size());
  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " series, one block each\n";
  dat += "# x y\n";
  std::string s = script_head(name, "a line plot of " + std::to_string(n) + " series",
                              "one block per series (gnuplot's `index k`), one line per point: "
                              "x, y",
                              opts.width_px, opts.height_px);
  s += section("Axes");
  if (!opts.title.empty())
    s += "set title " + quote(opts.title) + " font \"," + std::to_string(kTitleFont) + "\"\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  // The ranges: x over every series, y over the left axis's (a right-axis series has its own).
  const bool right =
      std::any_of(series.begin(), series.end(), [](const Series& sr) { return sr.right_axis; });
  double xlo = series[0].x[0], xhi = xlo;
  double ylo = std::numeric_limits<double>::infinity(), yhi = -ylo;
  for (const Series& sr : series) {
    const auto [x0, x1] = std::minmax_element(sr.x.begin(), sr.x.end());
    xlo = std::min(xlo, *x0), xhi = std::max(xhi, *x1);
    if (sr.right_axis) continue;
    const auto [y0, y1] = std::minmax_element(sr.y.begin(), sr.y.end());
    ylo = std::min(ylo, *y0), yhi = std::max(yhi, *y1);
  }
  if (!std::isfinite(ylo)) ylo = opts.logy ? 1.0 : 0.0, yhi = opts.logy ? 10.0 : 1.0;
  for (const auto& line : opts.hlines)
    ylo = std::min(ylo, line.first), yhi = std::max(yhi, line.first);
  if (opts.logx) s += log_axis('x', xlo, xhi);
  if (opts.logy) s += log_axis('y', ylo, yhi);
  s += "set autoscale xfix  # x runs exactly over the data, not to the next round number\n";
  s += "set grid lc rgb \"#dddddd\"\n";
  s += "set tics out nomirror\n";
  if (right) {
    s += "# A second y axis on the right for the series marked (right) in the legend.\n";
    s += "set border 11  # left, bottom and right\n";
    s += "set ytics nomirror\n";
    s += "set y2tics\n";
    if (!opts.y2label.empty()) s += "set y2label " + quote(opts.y2label) + "\n";
  } else {
    s += "set border 3  # left and bottom only\n";
  }
  if (!opts.xtics.empty()) {
    s += "# Named ticks, slanted so that long names do not run into each other.\n";
    s += "set xtics (";
    for (std::size_t i = 0; i < opts.xtics.size(); ++i) {
      s += quote(opts.xtics[i].second) + " " + num(opts.xtics[i].first);
      if (i + 1 < opts.xtics.size()) s += ", \\\n    ";
    }
    s += ") rotate by 30 right\n";
    s += "set xrange [" + num(xlo - 0.5) + ":" + num(xhi + 0.5) + "]\n";
  }
  if (!opts.hlines.empty()) {
    // The lines need not lie within the curves' range: widen y to show them too.
    if (opts.logy) {
      s += "set yrange [" + num(std::pow(10.0, std::floor(std::log10(ylo)))) + ":" +
           num(std::pow(10.0, std::ceil(std::log10(yhi)))) + "]\n";
    } else {
      const double pad = 0.05 * (yhi > ylo ? yhi - ylo : 1.0);
      s += "set yrange [" + num(ylo - pad) + ":" + num(yhi + pad) + "]\n";
    }
  }
  for (const auto& [y, label] : opts.hlines) {
    s += "set arrow from graph 0, first " + num(y) + " to graph 1, first " + num(y) +
         " nohead dt 2 lw 1.5 lc rgb \"#666666\"\n";
    s += "set label " + quote(label) + " at graph 0.01, first " + num(y) +
         " offset 0, 0.7 tc rgb \"#444444\"\n";
  }
  s += section("Legend");
  s += "# Below the plot, one entry per line, so long labels never cover a curve; height 1 keeps\n";
  s += "# the first entry clear of the x label.\n";
  s += "set key below left Left reverse maxcols 1 samplen 4 height 1\n";
  s += section("Curves");
  s += "# Colours (Okabe and Ito) stay distinguishable with colour-blindness; dt 2 is dashed,\n";
  s += "# pt 7 a filled circle.\n";
  s += "plot ";
  for (int k = 0; k < n; ++k) {
    const Series& sr = series[static_cast<std::size_t>(k)];
    dat += "\n\n# series " + std::to_string(k) + ": " + one_line(sr.label) + "\n";
    for (std::size_t i = 0; i < sr.x.size(); ++i) dat += num(sr.x[i]) + " " + num(sr.y[i]) + "\n";
    if (k > 0) s += ", \\\n     ";
    s += "datafile index " + std::to_string(k) + " using 1:2 with " +
         (!sr.line    ? "points pt 7 ps 1.2"
          : sr.points ? "linespoints pt 7 ps 0.7"
                      : "lines") +
         " lw 2 lc rgb \"" + kLineColours[k % 8] + "\" dt " + (sr.dashed ? "2" : "1") +
         (sr.right_axis ? " axes x1y2 " : " ") +
         (sr.label.empty() ? std::string("notitle")
                           : "title " + quote(sr.right_axis ? sr.label + " (right)" : sr.label));
  }
  s += "\n";
  return render(name, s, dat);
}

}  // namespace course
