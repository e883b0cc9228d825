// heatmaps.cpp: a matrix as a heat map, and a grid of them, as .dat, .gp and .png.
//
// Layout is computed here in pixels (margins placed `at screen`) rather than left to gnuplot's
// automatic margins: then every heat-map cell has a known size, the value text inside it can be
// sized to fit, and the shared colour bar of a grid sits in a known place.
#include "course/plot.hpp"

#include "course/detail/gnuplot_script.hpp"
#include "course/detail/heatmap_twin.hpp"

namespace course {

using namespace plot_detail;

// ---- Heat map -----------------------------------------------------------------------------------

Figure Plotter::heatmap(const std::string& name, const Matrix& values, const HeatmapOptions& opts) {
  constexpr std::string_view where = "heatmap";
  check_name(where, name);
  if (values.size() == 0) invalid(where, "the matrix is empty " + shape_str(values));
  check_px(where, "width_px", opts.width_px);
  check_px(where, "height_px", opts.height_px);
  check_precision(where, opts.value_precision);
  if (!opts.xtics.empty() && static_cast<Index>(opts.xtics.size()) != values.cols())
    invalid(where, std::to_string(opts.xtics.size()) + " xtics for a matrix " + shape_str(values) +
                       " (one per column)");
  if (!opts.ytics.empty() && static_cast<Index>(opts.ytics.size()) != values.rows())
    invalid(where, std::to_string(opts.ytics.size()) + " ytics for a matrix " + shape_str(values) +
                       " (one per row)");
  check_first_index(where, opts.first_index);
  check_mask(where, "", opts.allowed, values);
  check_scores(where, "", opts.scores, values);
  const Range cr = colour_range(where, values, opts.cmin, opts.cmax);
  if (!enabled_) return {};

  // Layout in pixels: margins for the text around the cells, the rest for the cells.
  const double W = opts.width_px, H = opts.height_px;
  const Index rows = values.rows(), cols = values.cols();
  const int first = opts.first_index;
  const bool masked = blocks_any(opts.allowed);
  const int ytic_chars = tic_chars(opts.ytics, rows, first);
  const int xtic_chars = tic_chars(opts.xtics, cols, first);
  const double left = 14 + (opts.ylabel.empty() ? 0 : kLinePx * text_lines(opts.ylabel) + 8) +
                      ytic_chars * kCharPx + 8;
  const double right = opts.colorbar ? 100 : 24;
  const double top = opts.title.empty() ? 16 : 16 + kTitleLinePx * text_lines(opts.title) + 8;
  const double cell_w = (W - left - right) / static_cast<double>(cols);
  // Column labels wider than their cell are turned 45 degrees so they cannot overlap (beyond
  // 24 unlabelled columns gnuplot spaces the index tics itself; see cell_tics).
  const bool rotate_x = (!opts.xtics.empty() || cols <= 24) && xtic_chars * kCharPx > 0.9 * cell_w;
  const double xtic_h = rotate_x ? 0.72 * xtic_chars * kCharPx + 14 : kLinePx + 8;
  const double bottom = 10 + xtic_h +
                        (opts.xlabel.empty() ? 0 : kLinePx * text_lines(opts.xlabel) + 6) +
                        (masked ? kBlockedKeyPx : 0);
  const double cell_h = (H - top - bottom) / static_cast<double>(rows);
  if (cell_w < 1 || cell_h < 1)
    invalid(where, "a " + std::to_string(opts.width_px) + " x " + std::to_string(opts.height_px) +
                       " px figure leaves no room for the cells of a matrix " + shape_str(values));
  const int value_font =
      opts.show_values ? value_font_for(cell_w, cell_h, value_chars(values, opts.value_precision))
                       : 0;

  std::string dat = "# " + name + ".dat: heat map of a matrix " + shape_str(values) + "\n";
  dat += cells_header(masked, first);
  matrix_block(dat, values, opts.allowed, first);

  std::string s = script_head(name, "a heat map of a matrix " + shape_str(values),
                              "one line per "
                              "cell: column, row, value",
                              opts.width_px, opts.height_px);
  s += palette_section();
  s += section("Colour range");
  s += "# Fixed rather than autoscaled, so colours mean the same value in every figure that\n";
  s += "# uses the same range (and so ink() below knows where the dark half ends).\n";
  s += "cmin = " + num(cr.lo) + "\n";
  s += "cmax = " + num(cr.hi) + "\n";
  s += "set cbrange [cmin:cmax]\n";
  s += opts.colorbar ? "set colorbox\n" : "unset colorbox\n";
  s += section("Axes: column c along x, row r down y (the first row at the top, as printed)");
  s += "set xrange [" + cell_range(cols, first) + "]\n";
  s += "set yrange [" + cell_range_reversed(rows, first) + "]  # reversed: the first row on top\n";
  s += "set tics scale 0  # no tick marks: the labels sit at the cell centres\n";
  s += cell_tics('x', opts.xtics, cols, first, columns_per_label(cell_w, xtic_chars, rotate_x));
  if (rotate_x) s += "set xtics rotate by 45 right  # labels wider than a cell\n";
  s += cell_tics('y', opts.ytics, rows, first, rows_per_label(cell_h));
  if (!opts.title.empty())
    s += "set title " + quote(opts.title) + " font \"," + std::to_string(kTitleFont) + "\"\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  s += section("Margins (fractions of the image), so every cell has a known size");
  s += "set lmargin at screen " + frac(left, W) + "\n";
  s += "set rmargin at screen " + frac(W - right, W) + "\n";
  s += "set bmargin at screen " + frac(bottom, H) + "\n";
  s += "set tmargin at screen " + frac(H - top, H) + "\n";
  s += cell_functions_section();
  if (opts.show_values && value_font == 0)
    s += "# The values are left out: cells of " + fixed_text(cell_w, 0) + " x " +
         fixed_text(cell_h, 0) + " px are too small for readable text.\n";
  if (masked) s += blocked_key(W, H);
  s += section("Plot");
  s += cell_plot("", cell_w, cell_h, value_font, opts.value_precision, masked);
  const Matrix* scores = opts.scores.size() > 0 ? &opts.scores : nullptr;
  Figure fig = render(name, s, dat);
  fig.html = write_twin(out_dir_, name,
                        {.title = opts.title,
                         .xlabel = opts.xlabel,
                         .ylabel = opts.ylabel,
                         .value_name = opts.value_name,
                         .first_index = first,
                         .cmin = cr.lo,
                         .cmax = cr.hi,
                         .maps = {{"", &values, scores, &opts.xtics, &opts.ytics, &opts.allowed}}});
  return fig;
}

// ---- Grid of heat maps --------------------------------------------------------------------------

Figure Plotter::heatmap_grid(const std::string& name, const std::vector<HeatmapPanel>& panels,
                             const GridOptions& opts) {
  constexpr std::string_view where = "heatmap_grid";
  check_name(where, name);
  if (panels.empty()) invalid(where, "no panels");
  if (opts.columns < 1)
    invalid(where, "columns must be at least 1, got " + std::to_string(opts.columns));
  check_px(where, "panel_px", opts.panel_px);
  check_px(where, "max_width_px", opts.max_width_px);
  check_precision(where, opts.value_precision);
  check_first_index(where, opts.first_index);
  std::vector<Range> ranges;
  for (std::size_t k = 0; k < panels.size(); ++k) {
    if (panels[k].values.size() == 0)
      invalid(where,
              "panel " + std::to_string(k) + " has an empty matrix " + shape_str(panels[k].values));
    ranges.push_back(colour_range(std::string(where) + " panel " + std::to_string(k),
                                  panels[k].values, opts.cmin, opts.cmax));
    const auto tics_fit = [&](const std::vector<std::string>& tics, Index count, const char* axis) {
      if (!tics.empty() && static_cast<Index>(tics.size()) != count)
        invalid(where, "panel " + std::to_string(k) + " has " + std::to_string(tics.size()) + " " +
                           axis + " for a matrix " + shape_str(panels[k].values));
    };
    tics_fit(panels[k].xtics, panels[k].values.cols(), "xtics");
    tics_fit(panels[k].ytics, panels[k].values.rows(), "ytics");
    check_mask(where, "panel " + std::to_string(k) + " has a ", panels[k].allowed,
               panels[k].values);
    check_scores(where, "panel " + std::to_string(k) + " has ", panels[k].scores, panels[k].values);
  }
  if (!enabled_) return {};

  const bool shared = opts.cmin && opts.cmax;
  const int n = static_cast<int>(panels.size());
  const int C = std::min(opts.columns, n), R = (n + C - 1) / C;
  const int first = opts.first_index;
  // The widest tic label of any panel on each axis (a number or a token), and whether any
  // panel has a mask.
  int ytic_chars = 0, xtic_chars = 0;
  Index max_cols = 1;
  bool any_title = false, masked = false;
  bool every_x_tic = false;  // a panel labels every column (beyond 24 gnuplot picks round steps)
  for (const auto& p : panels) {
    const Index rows = p.values.rows(), cols = p.values.cols();
    ytic_chars = std::max(ytic_chars, tic_chars(p.ytics, rows, first));
    xtic_chars = std::max(xtic_chars, tic_chars(p.xtics, cols, first));
    max_cols = std::max(max_cols, cols);
    every_x_tic = every_x_tic || !p.xtics.empty() || cols <= 24;
    any_title = any_title || !p.title.empty();
    masked = masked || blocks_any(p.allowed);
  }
  // Pixels around each square: tics and labels on the left and below, the panel title above,
  // and the panel's own colour bar on the right when the scales are not shared.
  const double pad_l = 12 + (opts.ylabel.empty() ? 0 : kLinePx * text_lines(opts.ylabel) + 6) +
                       ytic_chars * kCharPx + 8;
  const double pad_r = shared || !opts.colorbar ? 16 : 90;
  const double bar = shared && opts.colorbar ? 72 : 0;  // one shared bar, right of all panels
  // The squares shrink (down to kMinPanelPx) until the grid fits max_width_px, so that a page
  // shows it at full size rather than scaled down to unreadable text.
  const double fit = (opts.max_width_px - bar) / C - pad_l - pad_r;
  const double a = std::max<double>(std::min<double>(opts.panel_px, fit), kMinPanelPx);
  // Column labels wider than their cells are turned 45 degrees (as in a single heat map).
  const bool rotate_x =
      every_x_tic && xtic_chars * kCharPx > 0.9 * a / static_cast<double>(max_cols);
  const double pad_t = any_title ? kLinePx + 16 : 10;
  // A label turned 45 degrees reaches 0.71 of its length below the axis, after gnuplot's offset
  // of about a line; a grid's next row of panels (its titles) starts right below, so the room is
  // counted generously (0.72 of the length plus 14 px let "<pad>" run into the next titles).
  const double xtic_h = rotate_x ? 0.8 * xtic_chars * kCharPx + kLinePx + 14 : kLinePx + 14;
  const double pad_b = xtic_h + (opts.xlabel.empty() ? 0 : kLinePx * text_lines(opts.xlabel) + 12);
  const double head = opts.title.empty() ? 8 : kTitleLinePx * text_lines(opts.title) + 18;
  const double W = C * (pad_l + a + pad_r) + bar;
  const double H = head + R * (pad_t + a + pad_b) + (masked ? kBlockedKeyPx : 0);
  const int Wpx = static_cast<int>(std::lround(W)), Hpx = static_cast<int>(std::lround(H));

  std::string dat = "# " + name + ".dat: " + std::to_string(n) + " heat maps, one block each\n";
  dat += cells_header(masked, first);
  std::string s = script_head(name, "a grid of " + std::to_string(n) + " heat maps",
                              "one block per panel (gnuplot's `index k`), one line per cell: "
                              "column, row, value",
                              Wpx, Hpx);
  s += palette_section();
  s += cell_functions_section();
  s += section("Shared settings");
  s += "set tics scale 0  # no tick marks: the labels sit at the cell centres\n";
  if (!opts.xlabel.empty()) s += "set xlabel " + quote(opts.xlabel) + "\n";
  if (!opts.ylabel.empty()) s += "set ylabel " + quote(opts.ylabel) + "\n";
  if (shared) {
    s += "# One colour scale for every panel, so the same colour is the same value everywhere.\n";
    s += "cmin = " + num(*opts.cmin) + "\n";
    s += "cmax = " + num(*opts.cmax) + "\n";
    s += "set cbrange [cmin:cmax]\n";
  }
  if (!opts.colorbar) {
    s += "unset colorbox  # the title says what the colours mean\n";
  } else if (shared) {
    // The bar runs from the top of the first row of squares to the bottom of the last.
    const double bar_top = head + pad_t;
    const double bar_bottom = head + (R - 1) * (pad_t + a + pad_b) + pad_t + a;
    s += "# The colour bar is drawn once, right of the grid.\n";
    s += "set colorbox user origin screen " + frac(W - bar + 14, W) + ", screen " +
         frac(H - bar_bottom, H) + " size screen " + frac(18, W) + ", screen " +
         frac(bar_bottom - bar_top, H) + "\n";
  } else {
    s += "# Each panel is scaled to its own values and has its own colour bar.\n";
  }
  if (rotate_x) s += "set xtics rotate by 45 right  # labels wider than a cell\n";
  s += section("Panels");
  s += "set multiplot";
  if (!opts.title.empty())
    s += " title " + quote(opts.title) + " font \"," + std::to_string(kTitleFont) + "\"";
  s += "\n";
  for (int k = 0; k < n; ++k) {
    const HeatmapPanel& p = panels[static_cast<std::size_t>(k)];
    const Index rows = p.values.rows(), cols = p.values.cols();
    const int r = k / C, c = k % C;
    const double x0 = c * (pad_l + a + pad_r) + pad_l;
    const double y_top = head + r * (pad_t + a + pad_b) + pad_t;  // from the top edge
    const double cell_w = a / static_cast<double>(cols), cell_h = a / static_cast<double>(rows);
    const int value_font =
        opts.show_values
            ? value_font_for(cell_w, cell_h, value_chars(p.values, opts.value_precision))
            : 0;

    dat += "\n\n# panel " + std::to_string(k) + ": " + shape_str(p.values) + " " +
           one_line(p.title) + "\n";
    matrix_block(dat, p.values, p.allowed, first);

    s += "\n# Panel " + std::to_string(k) + " (row " + std::to_string(r) + ", column " +
         std::to_string(c) + "): " + one_line(p.title) + "\n";
    s += "set lmargin at screen " + frac(x0, W) + "; set rmargin at screen " + frac(x0 + a, W) +
         "\n";
    s += "set tmargin at screen " + frac(H - y_top, H) + "; set bmargin at screen " +
         frac(H - y_top - a, H) + "\n";
    if (!shared) {
      s += "cmin = " + num(ranges[static_cast<std::size_t>(k)].lo) +
           "; cmax = " + num(ranges[static_cast<std::size_t>(k)].hi) + "\n";
      s += "set cbrange [cmin:cmax]\n";
    } else if (k == 1) {
      s += "unset colorbox  # drawn with panel 0 already\n";
    }
    s += "set xrange [" + cell_range(cols, first) + "]; set yrange [" +
         cell_range_reversed(rows, first) + "]\n";
    s += cell_tics('x', p.xtics, cols, first, columns_per_label(cell_w, xtic_chars, rotate_x)) +
         cell_tics('y', p.ytics, rows, first, rows_per_label(cell_h));
    s += "set title " + quote(p.title) + "\n";
    if (opts.show_values && value_font == 0)
      s += "# (values left out: the cells are too small for readable text)\n";
    // With the last panel only: objects and labels are drawn again with every later panel.
    if (masked && k == n - 1) s += blocked_key(W, H);
    s += cell_plot(" index " + std::to_string(k), cell_w, cell_h, value_font, opts.value_precision,
                   blocks_any(p.allowed));
  }
  s += "unset multiplot\n";
  TwinFigure twin_figure{.title = opts.title,
                         .xlabel = opts.xlabel.empty() ? opts.column_name : opts.xlabel,
                         .ylabel = opts.ylabel.empty() ? opts.row_name : opts.ylabel,
                         .value_name = opts.value_name,
                         .first_index = first,
                         .cmin = opts.cmin && opts.cmax ? opts.cmin : std::nullopt,
                         .cmax = opts.cmin && opts.cmax ? opts.cmax : std::nullopt,
                         .maps = {}};
  for (const HeatmapPanel& p : panels) {
    twin_figure.maps.push_back({p.title, &p.values, p.scores.size() > 0 ? &p.scores : nullptr,
                                &p.xtics, &p.ytics, &p.allowed});
  }
  Figure fig = render(name, s, dat);
  fig.html = write_twin(out_dir_, name, twin_figure);
  return fig;
}

}  // namespace course
