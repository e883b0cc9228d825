// test_heatmap_twin.cpp: a heat map's interactive twin (<name>.html,
// course/detail/heatmap_twin.hpp). These tests read the page's figure data (the JSON the viewer
// draws from) and check it against the matrices the test gave, so what a learner hovers is what the
// chapter computed. That the viewer shows a hovered cell is checked in a real browser by
// scripts/check_site.py, on every twin of the site (its self-test plants a twin that shows the
// wrong cell).
#include "course/plot.hpp"

#include "attn/ops/masks.hpp"
#include "chapter_run.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using attn::Matrix;

namespace test_heatmap_twin {

// The JSON inside <script id="figure-data">.
nlohmann::json figure_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"figure-data\">";
  const std::size_t from = page.find(open);
  if (from == std::string::npos) return nullptr;
  const std::size_t begin = from + open.size(), end = page.find("</script>", begin);
  return nlohmann::json::parse(page.substr(begin, end - begin), nullptr, false);
}

class HeatmapTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = attn_test::scratch("twin", info->name());
  }
  // No gnuplot needed: the twin is written whether or not the PNG can be rendered.
  course::Plotter plot() const { return course::Plotter(dir_, true, "/nonexistent/attn-gnuplot"); }
  std::string page(const std::string& name) const {
    return attn_test::read_file(dir_ / (name + ".html"));
  }
  fs::path dir_;
};

// A causal 3 x 3 example: weights, the scores they came from, and the labels.
struct Causal {
  Matrix weights{3, 3}, scores{3, 3};  // [3 x 3] each
  std::vector<std::string> tokens{"<s>", "</s>", "a\"b"};
  Causal() {
    const float inf = std::numeric_limits<float>::infinity();
    weights << 1.0f, 0.0f, 0.0f,  //
        0.25f, 0.75f, 0.0f,       //
        0.1f, 0.2f, 0.7f;
    scores << 0.5f, -inf, -inf,   //
        -1.0f, 0.0986123f, -inf,  //
        1.0f / 3.0f, 2.0f, 3.0f;
  }
};

TEST_F(HeatmapTwin, HoldsEveryCellWithItsScoreLabelsAndMask) {
  const Causal c;
  testing::internal::CaptureStdout();  // "gnuplot not found" goes to stdout
  const course::Figure fig = plot().heatmap("w", c.weights,
                                            {.title = "Causal weights",
                                             .xlabel = "key",
                                             .ylabel = "query",
                                             .xtics = c.tokens,
                                             .ytics = c.tokens,
                                             .allowed = attn::causal_mask(3),
                                             .cmin = 0.0,
                                             .cmax = 1.0,
                                             .value_name = "weight",
                                             .scores = c.scores});
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(fig.html, dir_ / "w.html");
  const nlohmann::json d = figure_data(page("w"));
  ASSERT_TRUE(d.is_object()) << "no parseable figure data in w.html";
  EXPECT_EQ(d["title"], "Causal weights");
  EXPECT_EQ(d["xlabel"], "key");
  EXPECT_EQ(d["ylabel"], "query");
  EXPECT_EQ(d["value_name"], "weight");
  EXPECT_EQ(d["first_index"], 1);
  EXPECT_EQ(d["cmin"], 0.0);
  EXPECT_EQ(d["cmax"], 1.0);
  ASSERT_EQ(d["panels"].size(), 1u);
  const nlohmann::json& p = d["panels"][0];
  EXPECT_EQ(p["rows"], 3);
  EXPECT_EQ(p["cols"], 3);
  EXPECT_EQ(p["xtics"], c.tokens);
  EXPECT_EQ(p["ytics"], c.tokens);
  // Row-major, as the viewer indexes cell (i, j) at i * cols + j; six significant digits.
  EXPECT_EQ(p["values"], nlohmann::json({1.0, 0.0, 0.0, 0.25, 0.75, 0.0, 0.1, 0.2, 0.7}));
  // -inf (a blocked score) has no JSON number: the string the viewer reads as -inf.
  EXPECT_EQ(p["scores"],
            nlohmann::json({0.5, "-inf", "-inf", -1.0, 0.0986123, "-inf", 0.333333, 2.0, 3.0}));
  EXPECT_EQ(p["allowed"], nlohmann::json({1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

TEST_F(HeatmapTwin, ALabelCannotEndThePageScriptEarly) {
  // "</s>" inside <script> would end the element there, whatever JSON says; the page must carry
  // it as "<\/s>", which JSON reads back as "</s>".
  const Causal c;
  testing::internal::CaptureStdout();
  plot().heatmap("w", c.weights, {.xtics = c.tokens, .ytics = c.tokens});
  testing::internal::GetCapturedStdout();
  const std::string html = page("w");
  const std::size_t data = html.find("id=\"figure-data\">");
  ASSERT_NE(data, std::string::npos);
  EXPECT_EQ(html.find("</s>", data), std::string::npos) << "a raw </s> inside the data";
  EXPECT_EQ(figure_data(html)["panels"][0]["xtics"][1], "</s>");
  EXPECT_EQ(figure_data(html)["panels"][0]["xtics"][2], "a\"b");
}

TEST_F(HeatmapTwin, NonFiniteValuesAreNamedNotDropped) {
  Matrix m(1, 3);  // [1 x 3]
  m << std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 2.5f;
  testing::internal::CaptureStdout();
  plot().heatmap("nan", m, {});
  testing::internal::GetCapturedStdout();
  const nlohmann::json d = figure_data(page("nan"));
  EXPECT_EQ(d["panels"][0]["values"], nlohmann::json({"nan", "inf", 2.5}));
  EXPECT_TRUE(d["panels"][0]["scores"].is_null()) << "no scores were given";
  EXPECT_TRUE(d["panels"][0]["allowed"].is_null()) << "no mask was given";
}

TEST_F(HeatmapTwin, AGridIsOneMapPerPanelInOrder) {
  const Causal c;
  std::vector<course::HeatmapPanel> panels;
  for (int head = 1; head <= 3; ++head) {
    panels.push_back({.values = c.weights * static_cast<float>(head),
                      .title = "head " + std::to_string(head),
                      .xtics = c.tokens,
                      .ytics = c.tokens,
                      .scores = head == 2 ? c.scores : Matrix()});
  }
  testing::internal::CaptureStdout();
  plot().heatmap_grid("heads", panels,
                      {.xlabel = "key", .ylabel = "query", .value_name = "weight"});
  plot().heatmap_grid("shared", panels, {.cmin = 0.0, .cmax = 3.0});
  testing::internal::GetCapturedStdout();
  const nlohmann::json d = figure_data(page("heads"));
  ASSERT_EQ(d["panels"].size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(d["panels"][k]["title"], "head " + std::to_string(k + 1));
    EXPECT_EQ(d["panels"][k]["values"][4], 0.75 * (k + 1)) << "cell (1, 1) of head " << k + 1;
  }
  EXPECT_TRUE(d["panels"][0]["scores"].is_null());
  EXPECT_EQ(d["panels"][1]["scores"][3], -1.0);
  // Without a shared range each map is coloured by its own; with one, every map by it.
  EXPECT_TRUE(d["cmin"].is_null());
  EXPECT_EQ(figure_data(page("shared"))["cmax"], 3.0);
}

TEST_F(HeatmapTwin, ScoresOfAnotherShapeAreRefusedBeforeAnythingIsWritten) {
  const Causal c;
  course::Plotter p = plot();
  try {
    p.heatmap("bad", c.weights, {.scores = Matrix::Zero(3, 2)});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("scores [3 x 2] for a matrix [3 x 3]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(p.heatmap_grid("bad", {{.values = c.weights, .scores = Matrix::Zero(2, 3)}}, {}),
               std::invalid_argument);
  EXPECT_TRUE(attn_test::listing(dir_).empty());
}

TEST_F(HeatmapTwin, ThePageIsSelfContainedAndTheSameBytesEachTime) {
  const Causal c;
  testing::internal::CaptureStdout();
  plot().heatmap("w", c.weights, {.scores = c.scores});
  const std::string first = page("w");
  plot().heatmap("w", c.weights, {.scores = c.scores});
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(page("w"), first);
  // The viewer travels inside the page: no script, style or image is fetched from anywhere.
  EXPECT_NE(first.find("heatmap_viewer.js: the interactive twin"), std::string::npos);
  for (const char* fetch : {"src=", "href=", "http:", "https:", "@import"}) {
    EXPECT_EQ(first.find(fetch), std::string::npos) << fetch;
  }
}

TEST_F(HeatmapTwin, ADisabledPlotterWritesNoTwin) {
  course::Plotter off(dir_ / "plots", false);
  const course::Figure fig = off.heatmap("w", Causal().weights, {});
  EXPECT_TRUE(fig.html.empty());
  EXPECT_FALSE(fs::exists(dir_ / "plots"));
}

}  // namespace test_heatmap_twin
