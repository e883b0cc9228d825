// heatmap_twin.cpp: a heat map's interactive twin, one self-contained HTML page
// (course/detail/heatmap_twin.hpp says what it shows). The viewer's script is
// course/viewer/heatmap_viewer.js, built into this file by CMake (heatmap_viewer_js.hpp).
#include "course/detail/heatmap_twin.hpp"

#include "course/files.hpp"
#include "course/heatmap_viewer_js.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <string_view>

namespace course::plot_detail {

// Named, inside the anonymous namespace: with ATTN_UNITY this file shares one unit with the
// other files of course/.
namespace {
namespace twin {

using attn::Index;

// A number as the page shows it: 6 significant digits, the shortest text that reads back as
// that rounded value; JSON has no infinities or NaN, so those are the strings the viewer reads.
nlohmann::json shown(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::strtod(fmt::format("{:.6g}", v).c_str(), nullptr);
}

nlohmann::json numbers(const attn::Matrix& m) {  // row-major, as the viewer indexes them
  nlohmann::json out = nlohmann::json::array();
  for (Index i = 0; i < m.rows(); ++i) {
    for (Index j = 0; j < m.cols(); ++j) out.push_back(shown(m(i, j)));
  }
  return out;
}

nlohmann::json labels(const std::vector<std::string>* tics) {
  return tics != nullptr ? nlohmann::json(*tics) : nlohmann::json::array();
}

nlohmann::json figure_json(const TwinFigure& f) {
  nlohmann::json maps = nlohmann::json::array();
  for (const TwinMap& m : f.maps) {
    nlohmann::json map = {{"title", m.title},
                          {"rows", m.values->rows()},
                          {"cols", m.values->cols()},
                          {"xtics", labels(m.xtics)},
                          {"ytics", labels(m.ytics)},
                          {"values", numbers(*m.values)},
                          {"scores", m.scores != nullptr ? numbers(*m.scores) : nullptr},
                          {"allowed", nullptr}};
    if (m.allowed != nullptr && m.allowed->size() > 0) {
      nlohmann::json allowed = nlohmann::json::array();
      for (Index i = 0; i < m.allowed->rows(); ++i) {
        for (Index j = 0; j < m.allowed->cols(); ++j) allowed.push_back((*m.allowed)(i, j) ? 1 : 0);
      }
      map["allowed"] = std::move(allowed);
    }
    maps.push_back(std::move(map));
  }
  return {{"title", f.title},
          {"xlabel", f.xlabel},
          {"ylabel", f.ylabel},
          {"value_name", f.value_name},
          {"first_index", f.first_index},
          {"cmin", f.cmin ? nlohmann::json(*f.cmin) : nlohmann::json(nullptr)},
          {"cmax", f.cmax ? nlohmann::json(*f.cmax) : nlohmann::json(nullptr)},
          {"panels", std::move(maps)}};
}

// Text for HTML: the five characters that could end an element or an attribute escaped.
std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script>: "</" would end the element early, wherever it stands (a token "</s>").
std::string script_safe(std::string json) {
  for (std::size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) {
    json.replace(at, 2, "<\\/");
  }
  return json;
}

constexpr std::string_view kStyle = R"css(
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.2em; color: #1f2328; }
h1 { font-size: 1.25em; margin: 0 0 0.4em; }
.how { color: #57606a; margin: 0 0 0.6em; max-width: 46em; }
#readout { font-family: ui-monospace, monospace; min-height: 1.5em; margin: 0.4em 0;
           padding: 0.3em 0.5em; background: #f6f8fa; border-radius: 4px; }
.scroll { overflow: auto; max-width: 100%; max-height: 80vh; position: relative; }
#cursor { position: absolute; display: none; border: 1px solid #fff; outline: 1px solid #000;
          pointer-events: none; }
canvas { display: block; cursor: crosshair; image-rendering: pixelated; }
canvas:focus { outline: 2px solid #0969da; }
#colorbar { display: flex; max-width: 30em; margin-top: 0.5em; font-size: 12px; }
#colorbar span { flex: 1; height: 1.6em; line-height: 1.6em; padding: 0 2px; color: #fff;
                 text-shadow: 0 0 2px #000; white-space: nowrap; }
)css";

}  // namespace twin
}  // namespace

std::string twin_html(const TwinFigure& figure) {
  using namespace twin;
  const std::string title = escaped(figure.title.empty() ? "Heat map" : figure.title);
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>" + title + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n";
  page += "<body>\n<h1>" + title + "</h1>\n";
  page += "<p class=\"how\">Hover a cell to read it, or click the map and move with the arrow "
          "keys. The same numbers as the figure's .png and .dat, from the run that drew it.</p>\n";
  page += "<p><label>Map <select id=\"panel\"></select></label></p>\n";
  page += "<p id=\"readout\" aria-live=\"polite\">Hover a cell.</p>\n";
  page += "<div class=\"scroll\"><canvas id=\"map\" tabindex=\"0\" aria-label=\"" + title +
          ": hover a cell or use the arrow keys\"></canvas><div id=\"cursor\"></div></div>\n";
  page += "<div id=\"colorbar\" aria-hidden=\"true\"></div>\n";
  // Invalid UTF-8 in a label (a byte-pair token cut mid-character) becomes U+FFFD, not a throw.
  page += "<script type=\"application/json\" id=\"figure-data\">" +
          script_safe(
              figure_json(figure).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) +
          "</script>\n";
  page += "<script>\n" + std::string(kHeatmapViewerJs) + "</script>\n</body>\n</html>\n";
  return page;
}

std::filesystem::path write_twin(const std::filesystem::path& out_dir, const std::string& name,
                                 const TwinFigure& figure) {
  const std::filesystem::path path = out_dir / (name + ".html");
  write_file_atomically(path, twin_html(figure));
  return path;
}

}  // namespace course::plot_detail
