// print.cpp: fixed-precision, aligned, compact matrix printing and the chapters' banners.
#include "course/print.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace course {

namespace {

// Indices to show along one axis: all of them, or the first and last `limit / 2` with -1
// marking the elided middle.
std::vector<Index> visible(Index n, Index limit) {
  std::vector<Index> idx;
  if (limit < 2 || n <= limit) {
    for (Index i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  const Index head = limit / 2, tail = limit - head;
  for (Index i = 0; i < head; ++i) idx.push_back(i);
  idx.push_back(-1);
  for (Index i = n - tail; i < n; ++i) idx.push_back(i);
  return idx;
}

// Splits text into words at spaces (a run of spaces counts as one break). A space inside
// brackets does not break: a shape like "[2, 6, 32]" stays on one line.
std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const std::size_t start = i;
    int depth = 0;
    while (i < text.size() && (text[i] != ' ' || depth > 0)) {
      depth += text[i] == '[' ? 1 : text[i] == ']' ? -1 : 0;
      ++i;
    }
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

}  // namespace

std::string wrap(std::string_view text, std::string_view first, std::string_view rest,
                 std::size_t width) {
  std::string out, line(first);
  bool empty = true;  // no word on the line yet
  for (const std::string_view word : words_of(text)) {
    if (!empty && line.size() + 1 + word.size() > width) {
      out.append(line).append("\n");
      line.assign(rest);
      empty = true;
    }
    if (!empty) line += ' ';
    line += word;
    empty = false;
  }
  return out.append(line).append("\n");
}

std::string format_matrix(std::string_view name, const MatrixD& m, const PrintOptions& opts) {
  require(opts.precision >= 0 && opts.precision <= 17, "format_matrix",
          "precision must be in [0, 17], got " + std::to_string(opts.precision));
  // Printing is not a hot path: the messages may be built eagerly.
  require(opts.row_labels.empty() || std::ssize(opts.row_labels) == m.rows(), "format_matrix",
          std::to_string(opts.row_labels.size()) + " row labels for " + std::to_string(m.rows()) +
              " rows");
  require(opts.col_labels.empty() || std::ssize(opts.col_labels) == m.cols(), "format_matrix",
          std::to_string(opts.col_labels.size()) + " column labels for " +
              std::to_string(m.cols()) + " columns");
  std::string out;
  if (!name.empty()) out.append(name).append(" ").append(shape_str(m)).append("\n");

  const std::vector<Index> rows = visible(m.rows(), opts.max_rows);
  const std::vector<Index> cols = visible(m.cols(), opts.max_cols);

  // One width for every cell, so columns line up whatever the signs and magnitudes.
  std::size_t width = 3;  // room for "..."
  for (Index r : rows) {
    for (Index c : cols) {
      if (r >= 0 && c >= 0) width = std::max(width, fixed_text(m(r, c), opts.precision).size());
    }
  }
  for (Index c : cols) {
    if (c >= 0 && !opts.col_labels.empty()) {
      width = std::max(width, opts.col_labels[static_cast<std::size_t>(c)].size());
    }
  }
  std::size_t label_width = 0;
  for (const std::string& l : opts.row_labels) label_width = std::max(label_width, l.size());
  const auto row_label = [&](Index r) {
    if (opts.row_labels.empty()) return std::string();
    const std::string l = r < 0 ? "" : opts.row_labels[static_cast<std::size_t>(r)];
    return l + std::string(label_width - l.size() + 2, ' ');
  };
  const std::string indent(static_cast<std::size_t>(std::max(opts.indent, 0)), ' ');
  const auto line = [&](const std::string& lead, const auto& cell_of) {
    out += indent + lead;
    for (std::size_t k = 0; k < cols.size(); ++k) {
      const std::string cell = cell_of(cols[k]);
      if (k > 0) out += "  ";
      out.append(width - cell.size(), ' ').append(cell);
    }
    out += "\n";
  };
  if (!opts.col_labels.empty()) {
    line(std::string(opts.row_labels.empty() ? 0 : label_width + 2, ' '), [&](Index c) {
      return c < 0 ? std::string("...") : opts.col_labels[static_cast<std::size_t>(c)];
    });
  }
  for (Index r : rows) {
    line(row_label(r), [&](Index c) {
      return (r < 0 || c < 0) ? std::string("...") : fixed_text(m(r, c), opts.precision);
    });
  }
  return out;
}

std::vector<std::string> token_labels(const attn::TokenIds& ids, Index row,
                                      const std::map<int, std::string>& names) {
  require(row >= 0 && row < ids.rows(), "token_labels",
          [&] { return "row " + std::to_string(row) + " of ids " + shape_str(ids); });
  std::vector<std::string> out;
  for (const int id : ids.row(row)) {
    const auto name = names.find(id);
    out.push_back(name != names.end() ? name->second : std::to_string(id));
  }
  return out;
}

std::vector<std::string> id_labels(const attn::TokenIds& ids, Index row,
                                   const std::map<int, std::string>& names) {
  std::vector<std::string> out = token_labels(ids, row, names);
  for (Index i = 0; i < std::ssize(out); ++i) {
    if (!names.contains(ids(row, i))) out[static_cast<std::size_t>(i)].insert(0, "id ");
  }
  return out;
}

std::vector<std::string> labels(std::string_view prefix, Index n) {
  std::vector<std::string> out;
  for (Index i = 1; i <= n; ++i) out.push_back(std::string(prefix) + std::to_string(i));
  return out;
}

std::string with_commas(long long n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

void banner(std::ostream& os, std::string_view title) {
  constexpr std::size_t kWidth = 88;
  const std::size_t used = title.size() + 4;  // "== " + title + " "
  os << "\n== " << title << ' ' << std::string(used < kWidth ? kWidth - used : 0, '=') << "\n";
}

std::string fixed_text(double v, int precision) {
  char buf[400];  // 1e308 with 9 decimals still fits
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  return std::string(buf, r.ptr);
}

}  // namespace course
