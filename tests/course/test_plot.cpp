// test_plot.cpp: the gnuplot figures. Every test writes into a fresh temporary folder and checks
// the files themselves: the .dat numbers, the .gp script's relative names and palette, the PNG's
// own header (signature and IHDR size). Tests that need a rendered PNG skip when gnuplot is not
// installed; everything else runs without it.
#include "course/plot.hpp"

#include "chapter_run.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <locale>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using attn::Matrix;

namespace test_plot {

// ---- Helpers ------------------------------------------------------------------------------------

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Lines of a .dat file that hold numbers (not comments, not the blank block separators).
std::vector<std::string> data_rows(const fs::path& p) {
  std::istringstream in(slurp(p));
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  return rows;
}

struct PngSize {
  std::uint32_t width = 0, height = 0;
};

std::uint32_t be32(const std::string& b, std::size_t at) {
  return (std::uint32_t{static_cast<unsigned char>(b[at])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(b[at + 1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(b[at + 2])} << 8) |
         std::uint32_t{static_cast<unsigned char>(b[at + 3])};
}

// A PNG starts with an 8-byte signature, then the IHDR chunk (length, "IHDR", width, height):
// width and height are the big-endian words at bytes 16..19 and 20..23.
PngSize png_size(const fs::path& p) {
  const std::string b = slurp(p);
  static const std::string signature = "\x89PNG\r\n\x1a\n";
  EXPECT_GE(b.size(), 24u) << p;
  if (b.size() < 24) return {};
  EXPECT_EQ(b.substr(0, 8), signature) << p;
  EXPECT_EQ(b.substr(12, 4), "IHDR") << p;
  return {be32(b, 16), be32(b, 20)};
}

const std::array<const char*, 9> kAnchors = {"#440154", "#472c7a", "#3b518b", "#2c718e", "#21908d",
                                             "#27ad81", "#5cc863", "#aadc32", "#fde725"};

#define SKIP_WITHOUT_GNUPLOT()               \
  if (!course::Plotter::gnuplot_available()) \
  GTEST_SKIP() << "gnuplot is not on PATH: the PNG cannot be rendered here"

// A fresh, empty folder per test, removed afterwards.
class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("attn_test_plot_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Every file in the folder, sorted: checks that nothing else (no .tmp) was left behind.
  std::vector<std::string> listing() const { return attn_test::listing(dir_); }

  // A stand-in "gnuplot": a shell script with `body` after the #! line, made executable.
  fs::path fake_gnuplot(const std::string& body) const {
    const fs::path fake = dir_ / "fake-gnuplot.sh";
    std::ofstream(fake) << "#!/bin/sh\n" << body;
    fs::permissions(fake, fs::perms::owner_all);
    return fake;
  }

  fs::path dir_;
};

Matrix sample_3x4() {
  Matrix m(3, 4);               // [3 x 4]
  m << 0.0f, 0.1f, 0.2f, 0.3f,  //
      0.4f, 0.5f, 0.6f, 0.7f,   //
      0.8f, 0.9f, 1.0f, -0.25f;
  return m;
}

course::HeatmapOptions sample_heatmap_options() {
  course::HeatmapOptions o;
  o.title = "Weights \"A'\" (row 0 on top)";
  o.xlabel = "query";
  o.ylabel = "key";
  o.xtics = {"q^1", "q_2", "q3", "q4"};
  o.ytics = {"k1", "k2", "k3"};
  o.show_values = true;
  o.cmin = 0.0;
  o.cmax = 1.0;
  o.width_px = 640;
  o.height_px = 480;
  return o;
}

// ---- Heat map -----------------------------------------------------------------------------------

TEST_F(PlotTest, HeatmapWritesDataAndScriptWithRelativeNames) {
  course::Plotter plot(dir_, true, "/nonexistent/attn-gnuplot");  // files only; PNG tested below
  testing::internal::CaptureStdout();
  const course::Figure fig = plot.heatmap("hm", sample_3x4(), sample_heatmap_options());
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(fig.dat, dir_ / "hm.dat");
  EXPECT_EQ(fig.gp, dir_ / "hm.gp");
  EXPECT_EQ(fig.png, dir_ / "hm.png");
  ASSERT_TRUE(fs::exists(fig.dat));
  ASSERT_TRUE(fs::exists(fig.gp));

  // One line per cell: 3 rows x 4 columns, numbered from 1 like the course's text.
  const auto rows = data_rows(fig.dat);
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows.front(), "1 1 0");     // column 1, row 1: m(0, 0)
  EXPECT_EQ(rows[1], "2 1 0.1");        // shortest round-trip text of 0.1f
  EXPECT_EQ(rows.back(), "4 3 -0.25");  // column 4, row 3: m(2, 3)
  EXPECT_NE(slurp(fig.dat).find("# column row value"), std::string::npos) << "a column header";

  const std::string gp = slurp(fig.gp);
  for (const char* anchor : kAnchors) EXPECT_NE(gp.find(anchor), std::string::npos) << anchor;
  EXPECT_NE(gp.find("set palette defined"), std::string::npos);
  EXPECT_NE(gp.find("\"hm.dat\""), std::string::npos);
  EXPECT_NE(gp.find("\"hm.png\""), std::string::npos);
  EXPECT_EQ(gp.find(dir_.string()), std::string::npos) << "the script must use relative names";
  EXPECT_NE(gp.find("pngcairo size 640,480"), std::string::npos);
  EXPECT_NE(gp.find("noenhanced"), std::string::npos);
  EXPECT_NE(gp.find("set xrange [0.5:4.5]"), std::string::npos) << "columns 1..4";
  EXPECT_NE(gp.find("set yrange [3.5:0.5]"), std::string::npos) << "row 1 at the top";
  // The user's quote is escaped for gnuplot's double-quoted strings.
  EXPECT_NE(gp.find("\"Weights \\\"A'\\\" (row 0 on top)\""), std::string::npos);
  EXPECT_NE(gp.find("\"q^1\" 1, \"q_2\" 2, \"q3\" 3, \"q4\" 4"), std::string::npos);
  EXPECT_EQ(gp.find("blocked"), std::string::npos) << "no mask, no hatching and no key";
  EXPECT_NE(gp.find("sprintf(\"%.2f\", $3)"), std::string::npos) << "values with 2 digits";
}

TEST_F(PlotTest, HeatmapRendersPngOfTheRequestedSize) {
  SKIP_WITHOUT_GNUPLOT();
  course::Plotter plot(dir_);
  const course::Figure fig = plot.heatmap("hm", sample_3x4(), sample_heatmap_options());
  EXPECT_TRUE(fig.rendered);
  const PngSize size = png_size(fig.png);
  EXPECT_EQ(size.width, 640u);
  EXPECT_EQ(size.height, 480u);
  EXPECT_EQ(listing(), (std::vector<std::string>{"hm.dat", "hm.gp", "hm.html", "hm.png"}))
      << "no .tmp files are left behind";
}

TEST_F(PlotTest, HeatmapWithoutOptionsAndWithMaskedCellsRenders) {
  SKIP_WITHOUT_GNUPLOT();
  Matrix m(2, 3);  // [2 x 3]: a causal-style mask leaves -inf scores, plus one NaN
  const float inf = std::numeric_limits<float>::infinity();
  m << 1.5f, -inf, -inf,  //
      std::nanf(""), 2.0f, -3.0f;
  course::Plotter plot(dir_);
  course::HeatmapOptions o;
  o.show_values = true;
  const course::Figure fig = plot.heatmap("masked", m, o);
  EXPECT_TRUE(fig.rendered);
  const auto rows = data_rows(fig.dat);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[1], "2 1 -inf");
  EXPECT_EQ(rows[3], "1 2 nan");
  // The colour range comes from the finite values only.
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("cmin = -3\ncmax = 2\n"), std::string::npos) << gp;
  const PngSize size = png_size(fig.png);
  EXPECT_EQ(size.width, 800u);  // the HeatmapOptions defaults
  EXPECT_EQ(size.height, 640u);
}

// Indices for a quantity that starts at 0 (the position pos of PE): first_index = 0.
TEST_F(PlotTest, HeatmapNumbersFromZeroWhenAsked) {
  course::Plotter plot(dir_, true, "/nonexistent/attn-gnuplot");
  course::HeatmapOptions o;
  o.first_index = 0;
  testing::internal::CaptureStdout();
  const course::Figure fig = plot.heatmap("zero", sample_3x4(), o);
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(data_rows(fig.dat).front(), "0 0 0");
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("set xtics 0, 1, 3\n"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set yrange [2.5:-0.5]"), std::string::npos) << gp;
}

// A mask's blocked cells: a fourth .dat column (0 = blocked), hatched grey cells without a
// value, and a key. Without the mask a blocked weight of exactly 0 and a real 0.0037 both
// print "0.00"; with it the blocked one carries no number at all.
TEST_F(PlotTest, HeatmapHatchesBlockedCellsAndKeysThem) {
  Matrix w(2, 3);               // [2 x 3] weights; key 3 is padding, so column 3 is blocked
  w << 0.9963f, 0.0037f, 0.0f,  //
      0.5f, 0.5f, 0.0f;
  attn::AllowedMask allowed(2, 3);
  allowed << true, true, false,  //
      true, true, false;
  course::HeatmapOptions o;
  o.show_values = true;
  o.allowed = allowed;
  course::Plotter files_only(dir_, true, "/nonexistent/attn-gnuplot");
  testing::internal::CaptureStdout();
  const course::Figure fig = files_only.heatmap("blocked", w, o);
  testing::internal::GetCapturedStdout();
  const auto rows = data_rows(fig.dat);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[1], "2 1 0.0037 1");  // a small weight, allowed
  EXPECT_EQ(rows[2], "3 1 0 0");       // a blocked one
  const std::string gp = slurp(fig.gp);
  // Allowed cells are coloured and labelled; blocked ones neither, but hatched.
  EXPECT_NE(gp.find("using ($4 != 0 ? $1 : NaN):2:(half_w):(half_h):(finite($3) ? $3 : NaN)"),
            std::string::npos)
      << gp;
  EXPECT_NE(gp.find("using ($4 != 0 ? $1 : NaN):2:(sprintf("), std::string::npos) << gp;
  EXPECT_NE(gp.find("using ($4 != 0 ? NaN : $1):2:(0.5):(0.5)"), std::string::npos) << gp;
  EXPECT_NE(gp.find("fillstyle pattern"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set label 1 \"blocked\""), std::string::npos) << gp;

  // A grid with one masked panel gets the same, for that panel only.
  testing::internal::CaptureStdout();
  files_only.heatmap_grid("grid", {{w, "padded", {}, {}, allowed}, {w, "unmasked"}}, {});
  testing::internal::GetCapturedStdout();
  const std::string grid = slurp(dir_ / "grid.gp");
  const std::size_t panel1 = grid.find("# Panel 1");
  ASSERT_NE(panel1, std::string::npos);
  EXPECT_LT(grid.find("fillstyle pattern"), panel1) << "the hatching is panel 0's";
  EXPECT_EQ(grid.find("$4", panel1), std::string::npos) << "panel 1 has no mask column";

  // A mask of the wrong shape is refused, naming both shapes.
  o.allowed = attn::AllowedMask::Constant(3, 2, true);
  try {
    files_only.heatmap("bad", w, o);
    ADD_FAILURE() << "a [3 x 2] mask for a [2 x 3] matrix was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "Plotter::heatmap: mask [3 x 2] for a matrix [2 x 3] (the same shape, "
                           "or empty for no mask)");
  }

  if (!course::Plotter::gnuplot_available()) GTEST_SKIP() << "gnuplot is not on PATH";
  course::Plotter plot(dir_);
  o.allowed = allowed;
  EXPECT_TRUE(plot.heatmap("blocked", w, o).rendered);
  EXPECT_EQ(png_size(fig.png).height, 640u) << "the key's strip comes out of the cells";
}

TEST_F(PlotTest, OneByOneHeatmapRenders) {
  SKIP_WITHOUT_GNUPLOT();
  Matrix m(1, 1);
  m << 0.5f;  // a constant: the colour range is widened to 0..1 around it
  course::Plotter plot(dir_);
  course::HeatmapOptions o;
  o.show_values = true;
  o.width_px = 200;
  o.height_px = 200;
  EXPECT_TRUE(plot.heatmap("one", m, o).rendered);
  EXPECT_NE(slurp(dir_ / "one.gp").find("cmin = 0\ncmax = 1\n"), std::string::npos);
}

// ---- Grid ---------------------------------------------------------------------------------------

// The width of the PNG a script asks for ("pngcairo size W,H").
int script_width(const std::string& gp) {
  const std::size_t at = gp.find("pngcairo size ");
  return at == std::string::npos ? -1 : std::stoi(gp.substr(at + 14));
}

// Eight 320-px panels in four columns would be about 1,700 px wide, shown at half size on a page:
// the squares shrink until the grid fits max_width_px (900 by default), and token labels wider
// than their cells are turned so that they cannot overlap.
// 24 tokens in a square of ~210 px are 9-px cells: a 16-px line of text per row would pile the
// labels on each other, so every other token is labelled; with room, every one.
TEST_F(PlotTest, TicLabelsThinOutWhenCellsAreTooSmallForOneEach) {
  std::vector<std::string> tokens;
  for (char c = 'a'; c < 'a' + 24; ++c) tokens.emplace_back(1, c);
  const course::HeatmapPanel panel{Matrix::Constant(24, 24, 0.5f), "t", tokens, tokens};
  course::Plotter plot(dir_, true, "/nonexistent/attn-gnuplot");
  testing::internal::CaptureStdout();
  plot.heatmap_grid("small", {panel, panel, panel}, {.columns = 3});
  plot.heatmap_grid("big", {panel, panel, panel},
                    {.columns = 3, .panel_px = 480, .max_width_px = 3000});
  testing::internal::GetCapturedStdout();
  const std::string small = slurp(dir_ / "small.gp"), big = slurp(dir_ / "big.gp");
  EXPECT_NE(small.find("# A label every 2 cells"), std::string::npos) << small;
  EXPECT_NE(small.find("(\"a\" 1, \"c\" 3, \"e\" 5,"), std::string::npos) << small;
  EXPECT_EQ(small.find("\"b\" 2"), std::string::npos) << small;
  EXPECT_NE(big.find("(\"a\" 1, \"b\" 2, \"c\" 3,"), std::string::npos) << "20-px cells";
  EXPECT_EQ(big.find("# A label every"), std::string::npos);
}

TEST_F(PlotTest, GridShrinksToFitThePageAndTurnsWideLabels) {
  std::vector<course::HeatmapPanel> panels;
  const std::vector<std::string> tokens = {"<bos>", "5", "2", "<pad>", "<pad>"};
  for (int h = 0; h < 8; ++h)
    panels.push_back(
        {Matrix::Constant(5, 5, 0.2f), "head " + std::to_string(h + 1), tokens, tokens});
  course::Plotter plot(dir_, true, "/nonexistent/attn-gnuplot");
  testing::internal::CaptureStdout();
  plot.heatmap_grid("wide", panels, {.columns = 4, .cmin = 0.0, .cmax = 1.0, .panel_px = 320});
  plot.heatmap_grid(
      "narrow", panels,
      {.columns = 4, .cmin = 0.0, .cmax = 1.0, .panel_px = 320, .max_width_px = 2000});
  testing::internal::GetCapturedStdout();
  const std::string wide = slurp(dir_ / "wide.gp"), narrow = slurp(dir_ / "narrow.gp");
  EXPECT_LE(script_width(wide), 900) << wide;
  EXPECT_GT(script_width(wide), 800) << "it fills the width it has";
  EXPECT_GT(script_width(narrow), 1500) << "with room, the panels keep their 320 px";
  // 5 columns in a square of at most ~180 px: 36-px cells, too narrow for "<pad>" (35 px) with
  // its margin, so the labels are turned.
  EXPECT_NE(wide.find("set xtics rotate by 45 right"), std::string::npos);
  EXPECT_EQ(narrow.find("set xtics rotate by 45 right"), std::string::npos) << "64-px cells";
}

// colorbar = false leaves the bar out, and its room with it: for 0/1 values whose meaning the
// title gives, a continuous scale from 0 to 1 would suggest values in between.
TEST_F(PlotTest, GridWithoutColourBarDrawsNoneAndIsNarrower) {
  const std::vector<course::HeatmapPanel> panels(3, {Matrix::Identity(4, 4), "t"});
  course::Plotter plot(dir_, true, "/nonexistent/attn-gnuplot");
  testing::internal::CaptureStdout();
  plot.heatmap_grid("bar", panels, {.columns = 3, .cmin = 0.0, .cmax = 1.0, .panel_px = 200});
  plot.heatmap_grid("nobar", panels,
                    {.columns = 3, .cmin = 0.0, .cmax = 1.0, .colorbar = false, .panel_px = 200});
  plot.heatmap_grid("nobar_own", panels, {.columns = 3, .colorbar = false, .panel_px = 200});
  testing::internal::GetCapturedStdout();
  const std::string bar = slurp(dir_ / "bar.gp"), nobar = slurp(dir_ / "nobar.gp"),
                    own = slurp(dir_ / "nobar_own.gp");
  EXPECT_NE(bar.find("set colorbox user"), std::string::npos) << bar;
  for (const std::string* gp : {&nobar, &own}) {
    EXPECT_EQ(gp->find("\nset colorbox"), std::string::npos) << *gp;
    EXPECT_NE(gp->find("unset colorbox"), std::string::npos) << *gp;
  }
  // The shared bar takes 72 px right of the grid: without it the image is that much narrower.
  // (1 px either way: each width is rounded to whole pixels.)
  EXPECT_NEAR(script_width(bar) - script_width(nobar), 72, 1) << bar << nobar;
  // Panels with their own scales keep 90 px right of each for a bar: 16 without one.
  EXPECT_EQ(script_width(own), script_width(nobar)) << own;
}

TEST_F(PlotTest, GridWritesOneBlockPerPanelAndRenders) {
  std::vector<course::HeatmapPanel> panels;
  for (int h = 0; h < 3; ++h) {
    Matrix m(2, 3);  // [2 x 3]
    m << 0.1f * h, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f;
    panels.push_back({m, "head " + std::to_string(h)});
  }
  course::GridOptions o;
  o.title = "Three heads";
  o.columns = 2;
  o.cmin = 0.0;
  o.cmax = 1.0;
  o.show_values = true;
  o.panel_px = 200;
  course::Plotter plot(dir_, true, "attn-no-such-gnuplot-program");
  testing::internal::CaptureStdout();
  course::Figure fig = plot.heatmap_grid("grid", panels, o);
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(data_rows(fig.dat).size(), 18u);  // 3 panels x 6 cells
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("index 2"), std::string::npos);
  EXPECT_NE(gp.find("\"head 1\""), std::string::npos);
  EXPECT_NE(gp.find("set multiplot title \"Three heads\""), std::string::npos);
  for (const char* anchor : kAnchors) EXPECT_NE(gp.find(anchor), std::string::npos) << anchor;

  if (!course::Plotter::gnuplot_available()) GTEST_SKIP() << "gnuplot is not on PATH";
  course::Plotter real(dir_);
  fig = real.heatmap_grid("grid", panels, o);
  EXPECT_TRUE(fig.rendered);
  const PngSize size = png_size(fig.png);
  EXPECT_GE(size.width, 2u * 200u);  // two columns of 200 px squares, plus margins
  EXPECT_GE(size.height, 2u * 200u);
  EXPECT_LT(size.width, 2u * 200u + 400u);
  EXPECT_LT(size.height, 2u * 200u + 300u);

  // Without cmin/cmax each panel gets its own scale.
  o.cmin.reset();
  o.cmax.reset();
  EXPECT_TRUE(real.heatmap_grid("grid_own", panels, o).rendered);
  EXPECT_NE(slurp(dir_ / "grid_own.gp").find("cmin = 0.1; cmax = 0.6"), std::string::npos);
}

// ---- Histograms ---------------------------------------------------------------------------------

TEST_F(PlotTest, HistogramBinsMatchAHandCount) {
  // Range 0..4 in 4 bins of width 1: [0,1) [1,2) [2,3) [3,4], the maximum in the last bin.
  // NaN and inf are skipped. Counts: 0 -> 1, 1 and 1.5 -> 2, 2.999 -> 1, 3 and 4 -> 2.
  course::HistogramPanel a;
  a.values = {0.0, 1.0, 1.5,          2.999,
              3.0, 4.0, std::nan(""), std::numeric_limits<double>::infinity()};
  a.bins = 4;
  a.title = "hand";
  // A second panel: many values, the counts must add up to the finite ones.
  course::HistogramPanel b;
  for (int i = 0; i < 1000; ++i) b.values.push_back(std::sin(0.37 * i) * std::exp(0.001 * i));
  b.values.push_back(-std::numeric_limits<double>::infinity());
  b.bins = 30;
  b.title = "sines";
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  testing::internal::CaptureStdout();
  const course::Figure fig =
      plot.histograms("hist", {a, b}, {.title = "two", .width_px = 900, .height_px = 400});
  testing::internal::GetCapturedStdout();

  const auto rows = data_rows(fig.dat);
  ASSERT_EQ(rows.size(), 4u + 30u);
  const std::vector<std::string> expected = {"0.5 1 1", "1.5 2 1", "2.5 1 1", "3.5 2 1"};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(rows[i], expected[i]);
  long long total = 0;
  for (std::size_t i = 4; i < rows.size(); ++i) {
    std::istringstream in(rows[i]);
    double centre = 0, width = 0;
    long long count = -1;
    in >> centre >> count >> width;
    ASSERT_TRUE(in) << rows[i];
    total += count;
  }
  EXPECT_EQ(total, 1000);  // every finite sample, the -inf left out
  const std::string dat = slurp(fig.dat);
  EXPECT_NE(dat.find("2 non-finite samples skipped"), std::string::npos);
  EXPECT_NE(dat.find("1 non-finite samples skipped"), std::string::npos);
  EXPECT_NE(slurp(fig.gp).find("set multiplot layout 1,2"), std::string::npos);
}

TEST_F(PlotTest, HistogramRendersPngOfTheRequestedSize) {
  SKIP_WITHOUT_GNUPLOT();
  course::HistogramPanel a{{1, 2, 2, 3, 3, 3}, "a", "value", 3};
  course::HistogramPanel b{{5, 5, 5}, "constant", "value", 10};  // one value: unit-wide range
  course::Plotter plot(dir_);
  const course::Figure fig =
      plot.histograms("hist", {a, b}, {.title = "", .width_px = 700, .height_px = 300});
  EXPECT_TRUE(fig.rendered);
  const PngSize size = png_size(fig.png);
  EXPECT_EQ(size.width, 700u);
  EXPECT_EQ(size.height, 300u);
}

// One set of samples under two names: the top axis spans the bottom one's range times the
// factor. Bins by hand: 1..5 in 4 bins of 1, so x in [1, 5] and the top in [-0.5, -2.5]
// (a negative factor reverses the top axis, which gnuplot draws from its first end).
TEST_F(PlotTest, HistogramTopAxisReadsTheSameBinsScaled) {
  course::HistogramPanel a{{1, 2, 3, 4, 5}, "a", "a", 4};
  a.top_per_x = -0.5;
  a.top_label = "b = -a / 2";
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  testing::internal::CaptureStdout();
  const course::Figure fig = plot.histograms("hist", {a}, {});
  // A panel without the factor draws no top axis.
  const course::Figure plain = plot.histograms("plain", {{{1, 2}, "p", "x", 2}}, {});
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(slurp(plain.gp).find("x2"), std::string::npos);
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("set xrange [1:5]"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set x2range [-0.5:-2.5]"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set x2label \"b = -a / 2\""), std::string::npos) << gp;
}

// ---- Line plot ----------------------------------------------------------------------------------

std::vector<course::Series> sample_series() {
  course::Series a, b;
  a.label = "x^2 with W_hh in the label";
  b.label = "2^-x (dashed, no points)";
  for (int i = 1; i <= 10; ++i) {
    a.x.push_back(i);
    a.y.push_back(i * i);
    b.x.push_back(i);
    b.y.push_back(std::pow(2.0, -i));
  }
  b.dashed = true;
  b.points = false;
  return {a, b};
}

TEST_F(PlotTest, LogLinePlotRenders) {
  SKIP_WITHOUT_GNUPLOT();
  course::Plotter plot(dir_);
  const course::Figure fig = plot.lines("lines", sample_series(),
                                        {.title = "log-log",
                                         .xlabel = "x",
                                         .ylabel = "y",
                                         .logx = true,
                                         .logy = true,
                                         .width_px = 700,
                                         .height_px = 500});
  EXPECT_TRUE(fig.rendered);
  EXPECT_EQ(data_rows(fig.dat).size(), 20u);
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("set logscale x"), std::string::npos);
  EXPECT_NE(gp.find("set logscale y"), std::string::npos);
  EXPECT_NE(gp.find("dt 2"), std::string::npos);
  EXPECT_NE(gp.find("linespoints"), std::string::npos);
  EXPECT_NE(gp.find("\"lines.dat\""), std::string::npos);
  const PngSize size = png_size(fig.png);
  EXPECT_EQ(size.width, 700u);
  EXPECT_EQ(size.height, 500u);
}

// A series on the right-hand axis: its own scale, named in the legend, and left out of the
// left axis's range (a loss of 4 beside scores in [0, 1] would squash the scores otherwise).
TEST_F(PlotTest, ASeriesCanBeReadAgainstARightHandAxis) {
  SKIP_WITHOUT_GNUPLOT();
  course::Plotter plot(dir_);
  const course::Series score = course::curve("score", {0, 1, 2}, {0.1, 0.5, 0.9});
  const course::Series loss =
      course::curve("loss", {0, 1, 2}, {4.0, 2.0, -1.0}, {.right_axis = true});
  const course::Figure fig = plot.lines(
      "right", {score, loss},
      {.ylabel = "score",
       .y2label = "nats",
       .logy = true,
       .hlines = {{0.25, "a quarter"}}});  // a log left axis: the loss's -1 is still drawable
  EXPECT_TRUE(fig.rendered);
  const std::string gp = slurp(fig.gp);
  EXPECT_NE(gp.find("set y2tics"), std::string::npos);
  EXPECT_NE(gp.find("set y2label \"nats\""), std::string::npos);
  EXPECT_NE(gp.find("axes x1y2 title \"loss (right)\""), std::string::npos);
  EXPECT_EQ(gp.find("axes x1y2 title \"score"), std::string::npos);
  // The left axis's range (widened for the hline) holds the scores, not the loss: 0.1 .. 1.
  EXPECT_NE(gp.find("set yrange [0.1:1]"), std::string::npos) << gp;
  // Without a right-hand series nothing of it is written.
  const std::string plain = slurp(plot.lines("plain", {score}, {.y2label = "nats"}).gp);
  EXPECT_EQ(plain.find("y2"), std::string::npos);
}

// ---- Curves from Eigen vectors ------------------------------------------------------------------

TEST(Curve, ValuesOfTakesVectorsOneRowMatricesAndExpressions) {
  // Floats widen to double exactly, so every value compares equal to its float.
  Matrix row(1, 3);  // [1 x 3], a row of weights as softmax_rows returns it
  row << 0.1f, 0.2f, 0.7f;
  EXPECT_EQ(course::values_of(row), (std::vector<double>{0.1f, 0.2f, 0.7f}));
  attn::MatrixD table(3, 2);  // [3 x 2], a results table: x in column 0, y in column 1
  table << 1, 10,             //
      2, 20,                  //
      4, 40;
  EXPECT_EQ(course::values_of(table.col(1)), (std::vector<double>{10, 20, 40}));
  EXPECT_EQ(course::values_of(table.topRows(1)), (std::vector<double>{1, 10}));  // a [1 x 2] block
  // An expression is evaluated entry by entry: 1 - y / 40 = 0.75, 0.5, 0 (all exact in binary).
  EXPECT_EQ(course::values_of(1.0 - table.col(1).array() / 40.0),
            (std::vector<double>{0.75, 0.5, 0.0}));
  EXPECT_TRUE(course::values_of(Eigen::VectorXd()).empty());
  // A [3 x 2] matrix has no one order to flatten it in.
  EXPECT_THROW(course::values_of(table), std::invalid_argument);
}

TEST(Curve, FromEigenColumnsKeepsEveryPointAndTheStyle) {
  attn::MatrixD table(3, 2);  // [3 x 2]: d_k and a measured variance
  table << 1, 0.5,            //
      2, 2.25,                //
      4, 3.75;
  const course::Series solid = course::curve("var", table.col(0), table.col(1));
  EXPECT_EQ(solid.label, "var");
  EXPECT_EQ(solid.x, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(solid.y, (std::vector<double>{0.5, 2.25, 3.75}));
  EXPECT_TRUE(solid.points);
  EXPECT_FALSE(solid.dashed);
  const course::Series bound =
      course::curve("bound", {1.0, 4.0}, {1.0, 4.0}, {.points = false, .dashed = true});
  EXPECT_EQ(bound.x, (std::vector<double>{1, 4}));
  EXPECT_FALSE(bound.points);
  EXPECT_TRUE(bound.dashed);
  // x and y of different lengths are refused here, with the curve's label in the message.
  try {
    course::curve("lopsided", Eigen::VectorXd::Zero(3), Eigen::VectorXd::Zero(2));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "curve: curve \"lopsided\" has 3 x but 2 y values");
  }
  EXPECT_THROW(course::curve_for_log_y("l", {1.0}, {1.0, 2.0}), std::invalid_argument);
}

TEST_F(PlotTest, CurveForLogYDropsOnlyThePointsALogAxisCannotShow) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Eigen::VectorXd x(6), y(6);  // [6] each
  x << 1, 2, 3, 4, 5, 6;
  y << 0.5, 0.0, -1.0, 1e-300, -0.0, 2.0;  // 0, -1 and -0 cannot sit on a log axis
  const course::Series s = course::curve_for_log_y("norm", x, y, {.points = false, .dashed = true});
  EXPECT_EQ(s.x, (std::vector<double>{1, 4, 6}));
  EXPECT_EQ(s.y, (std::vector<double>{0.5, 1e-300, 2.0}));
  EXPECT_FALSE(s.points);
  EXPECT_TRUE(s.dashed);
  // What is left, Plotter::lines draws on a log y axis (it would refuse the dropped points).
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  testing::internal::CaptureStdout();
  plot.lines("log", {s}, {.logy = true});
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(data_rows(dir_ / "log.dat"), (std::vector<std::string>{"1 0.5", "4 1e-300", "6 2"}));
  // A NaN is not "not positive": it is kept, so that lines() reports it instead of hiding it.
  Eigen::VectorXd y_nan(2);  // [2]
  y_nan << nan, 1.0;
  const course::Series with_nan = course::curve_for_log_y("nan", x.head(2), y_nan);
  ASSERT_EQ(with_nan.y.size(), 2u);
  EXPECT_TRUE(std::isnan(with_nan.y[0]));
  EXPECT_THROW(plot.lines("nan", {with_nan}, {.logy = true}), std::invalid_argument);
}

// ---- Disabled, missing and failing gnuplot ------------------------------------------------------

TEST_F(PlotTest, DisabledPlotterWritesNothing) {
  const fs::path out = dir_ / "not_created";
  course::Plotter plot(out, false);
  EXPECT_FALSE(plot.enabled());
  testing::internal::CaptureStdout();
  const course::Figure a = plot.heatmap("hm", sample_3x4(), sample_heatmap_options());
  const course::Figure b = plot.lines("lines", sample_series(), {});
  const course::Figure c = plot.histograms("hist", {{{1, 2, 3}, "t", "x", 2}}, {});
  const course::Figure d = plot.heatmap_grid("grid", {{sample_3x4(), "p"}}, {});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  for (const course::Figure& f : {a, b, c, d}) {
    EXPECT_FALSE(f.rendered);
    EXPECT_TRUE(f.png.empty());
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(listing().empty());
  // Still validated: a --no-plots run catches the same mistakes.
  EXPECT_THROW(plot.heatmap("a/b", sample_3x4(), {}), std::invalid_argument);
}

TEST_F(PlotTest, MissingGnuplotWritesDataAndScriptAndSaysHowToRender) {
  course::Plotter plot(dir_, true, (dir_ / "no-such-gnuplot").string());
  testing::internal::CaptureStdout();
  const course::Figure fig = plot.heatmap("hm", sample_3x4(), sample_heatmap_options());
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_FALSE(fig.rendered);
  EXPECT_TRUE(fs::exists(dir_ / "hm.dat"));
  EXPECT_TRUE(fs::exists(dir_ / "hm.gp"));
  EXPECT_FALSE(fs::exists(dir_ / "hm.png"));
  EXPECT_EQ(out,
            "plot: gnuplot not found; render with: cd " + dir_.string() + " && gnuplot hm.gp\n");
  // The interactive twin needs no gnuplot: it is written all the same.
  EXPECT_EQ(listing(), (std::vector<std::string>{"hm.dat", "hm.gp", "hm.html"}));
}

TEST_F(PlotTest, FailingGnuplotThrowsWithItsStderrAndLeavesNoPng) {
  // A stand-in "gnuplot" that reports an error the way gnuplot does and exits non-zero.
  const fs::path fake = fake_gnuplot("echo 'line 7: undefined variable: oops' >&2\nexit 1\n");
  const fs::path out = dir_ / "out";
  course::Plotter plot(out, true, fake.string());
  try {
    plot.heatmap("hm", sample_3x4(), {});
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined variable: oops"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::exists(out / "hm.gp"));  // complete files, kept for the learner to debug
  EXPECT_FALSE(fs::exists(out / "hm.png"));
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

// The smallest whole PNG as a shell printf argument: the signature, then the IEND chunk.
constexpr const char* kPngPrintf = R"(printf '\211PNG\r\n\032\n\0\0\0\0IEND\256B`\202')";

TEST_F(PlotTest, GnuplotRunsInTheOutputFolderAndThePngComesFromItsStdout) {
  // A stand-in that proves where it ran and with which arguments, then writes a PNG to stdout.
  const fs::path fake =
      fake_gnuplot("pwd > where.txt\necho \"$@\" > args.txt\n" + std::string(kPngPrintf) + "\n");
  const fs::path out = dir_ / "out";
  course::Plotter plot(out, true, fake.string());
  EXPECT_TRUE(plot.heatmap("hm", sample_3x4(), {}).rendered);
  EXPECT_EQ(slurp(out / "where.txt"), fs::canonical(out).string() + "\n");
  EXPECT_EQ(slurp(out / "args.txt"), "-e to_stdout=1 hm.gp\n");
  EXPECT_EQ(fs::file_size(out / "hm.png"), 20u);
}

TEST_F(PlotTest, ACutShortPngIsAnErrorEvenWhenGnuplotExitsZero) {
  // gnuplot exits 0 after its output failed (a full disk): what it wrote is checked. Here a
  // stand-in writes the first 8 KiB of a PNG, no IEND chunk, and exits 0.
  const fs::path fake =
      fake_gnuplot("printf '\\211PNG\\r\\n\\032\\n'\nhead -c 8184 /dev/zero\nexit 0\n");
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "hm.png") << "the previous run's figure";
  course::Plotter plot(out, true, fake.string());
  try {
    plot.heatmap("hm", sample_3x4(), {});
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no whole PNG (8192 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(slurp(out / "hm.png"), "the previous run's figure") << "the old figure stays whole";
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

TEST_F(PlotTest, AFailedExitWithoutStderrSaysTheStatusAlone) {
  const fs::path fake = fake_gnuplot("exit 3\n");
  course::Plotter plot(dir_ / "out", true, fake.string());
  try {
    plot.heatmap("hm", sample_3x4(), {});
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("(exit status 3)"), std::string::npos) << what;
    EXPECT_FALSE(what.ends_with(": ")) << "no empty reason after a colon: " << what;
  }
}

// ---- Invalid input ------------------------------------------------------------------------------

TEST_F(PlotTest, InvalidInputThrowsInvalidArgument) {
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  const Matrix m = sample_3x4();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  auto hm = [&](const std::string& name, const Matrix& v, course::HeatmapOptions o) {
    return [&plot, name, v, o] { plot.heatmap(name, v, o); };
  };
  course::HeatmapOptions bad_x, bad_y, bad_range, nan_range, bad_precision, tiny;
  bad_x.xtics = {"a", "b"};
  bad_y.ytics = {"a", "b", "c", "d"};
  bad_range.cmin = 1.0;
  bad_range.cmax = 1.0;
  nan_range.cmax = nan;
  bad_precision.value_precision = -1;
  tiny.width_px = 10;
  Matrix all_nan(2, 2);
  all_nan.setConstant(std::nanf(""));
  Matrix tall(2000, 1);
  tall.setZero();

  course::Series mismatch{"m", {1, 2, 3}, {1, 2}, true, false};
  course::Series empty_series{"e", {}, {}, true, false};
  course::Series nan_y{"n", {1, 2}, {1, nan}, true, false};
  course::Series zero_x{"z", {0, 1}, {1, 2}, true, false};
  course::Series neg_y{"z", {1, 2}, {-1, 2}, true, false};

  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"empty name", hm("", m, {})},
      {"name with /", hm("a/b", m, {})},
      {"name with space", hm("a b", m, {})},
      {"name with quote", hm("a'b", m, {})},
      {"name starting with -", hm("-e", m, {})},
      {"name starting with .", hm(".hidden", m, {})},
      {"empty matrix", hm("x", Matrix(0, 3), {})},
      {"xtics size", hm("x", m, bad_x)},
      {"ytics size", hm("x", m, bad_y)},
      {"cmin not below cmax", hm("x", m, bad_range)},
      {"NaN cmax", hm("x", m, nan_range)},
      {"no finite value", hm("x", all_nan, {})},
      {"negative precision", hm("x", m, bad_precision)},
      {"tiny width", hm("x", m, tiny)},
      {"no room for cells", hm("x", tall, {})},
      {"grid without panels", [&] { plot.heatmap_grid("g", {}, {}); }},
      {"grid empty panel",
       [&] {
         plot.heatmap_grid("g", {{m, "a"}, {Matrix(), "b"}}, {});
       }},
      {"grid zero columns",
       [&] {
         plot.heatmap_grid("g", {{m, "a"}}, {.columns = 0});
       }},
      {"grid bad name",
       [&] {
         plot.heatmap_grid("g/h", {{m, "a"}}, {});
       }},
      {"histograms without panels", [&] { plot.histograms("h", {}, {}); }},
      {"histogram without values",
       [&] {
         plot.histograms("h", {{{}, "a", "", 10}}, {});
       }},
      {"histogram all NaN",
       [&] {
         plot.histograms("h", {{{nan, inf}, "a", "", 10}}, {});
       }},
      {"histogram zero bins",
       [&] {
         plot.histograms("h", {{{1, 2}, "a", "", 0}}, {});
       }},
      {"histogram top axis of NaN",
       [&] {
         plot.histograms("h", {{{1, 2}, "a", "", 2, nan, "b"}}, {});
       }},
      {"lines without series", [&] { plot.lines("l", {}, {}); }},
      {"lines x/y mismatch", [&] { plot.lines("l", {mismatch}, {}); }},
      {"lines empty series", [&] { plot.lines("l", {empty_series}, {}); }},
      {"lines NaN", [&] { plot.lines("l", {nan_y}, {}); }},
      {"lines log x of 0", [&] { plot.lines("l", {zero_x}, {.logx = true}); }},
      {"lines log y of -1", [&] { plot.lines("l", {neg_y}, {.logy = true}); }},
  };
  for (const auto& [what, call] : cases) EXPECT_THROW(call(), std::invalid_argument) << what;
  EXPECT_TRUE(listing().empty()) << "nothing is written for invalid input";

  // The message names the function and the problem.
  try {
    plot.heatmap("x", m, bad_x);
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "Plotter::heatmap: 2 xtics for a matrix [3 x 4] (one per column)");
  }
  try {
    plot.lines("l", {zero_x}, {.logx = true});
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "Plotter::lines: series 0 (\"z\") point 0 has x = 0, which a log x axis cannot show");
  }
}

// ---- Determinism --------------------------------------------------------------------------------

TEST_F(PlotTest, RerenderingGivesIdenticalDataAndScript) {
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  testing::internal::CaptureStdout();
  auto draw = [&] {
    plot.heatmap("hm", sample_3x4(), sample_heatmap_options());
    plot.lines("lines", sample_series(), {.logy = true});
    plot.histograms("hist", {{{0.1, 0.2, 0.25, 0.7}, "h", "x", 5}}, {});
    plot.heatmap_grid("grid", {{sample_3x4(), "a"}, {sample_3x4() * 2, "b"}}, {});
  };
  draw();
  std::vector<std::string> first;
  const auto files = {"hm.dat",   "hm.gp",   "hm.html",  "lines.dat", "lines.gp",
                      "hist.dat", "hist.gp", "grid.dat", "grid.gp",   "grid.html"};
  for (const char* f : files) first.push_back(slurp(dir_ / f));
  draw();
  testing::internal::GetCapturedStdout();
  std::size_t i = 0;
  for (const char* f : files) EXPECT_EQ(slurp(dir_ / f), first[i++]) << f;
}

// A decimal comma, as German or French number formatting has it: always available as a C++
// facet, so the test needs no system locale to be installed.
struct DecimalComma : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST_F(PlotTest, NumbersIgnoreTheLocale) {
  // Neither a global C++ locale with a decimal comma (which std::ostream would use) nor a C
  // locale with one (which printf would use, where de_DE or fr_FR is installed) may leak into
  // the files: std::to_chars ignores both.
  const std::locale saved_cpp =
      std::locale::global(std::locale(std::locale::classic(), new DecimalComma));
  const char* const saved_c = std::setlocale(LC_ALL, nullptr);
  const std::string restore_c = saved_c ? saved_c : "C";
  if (!std::setlocale(LC_ALL, "de_DE.UTF-8")) std::setlocale(LC_ALL, "fr_FR.UTF-8");
  course::Plotter plot(dir_, true, "/nonexistent/gnuplot");
  testing::internal::CaptureStdout();
  plot.lines("l", {{"a", {0.5, 1.25}, {2.5, 1e-7}, true, false}}, {});
  testing::internal::GetCapturedStdout();
  std::setlocale(LC_ALL, restore_c.c_str());
  std::locale::global(saved_cpp);
  EXPECT_EQ(data_rows(dir_ / "l.dat"), (std::vector<std::string>{"0.5 2.5", "1.25 1e-07"}));
}

}  // namespace test_plot
