// pager.cpp: --step's "[Enter: more]" when a step fills the screen.
#include "course/pager.hpp"

#include <sys/ioctl.h>

#include <algorithm>
#include <string>

namespace course {

Pager::Pager(std::streambuf* terminal, std::istream& in, int rows, int columns)
    : terminal_(terminal),
      in_(in),
      rows_(static_cast<std::size_t>(std::max(rows, 2))),
      columns_(static_cast<std::size_t>(std::max(columns, 1))) {}

void Pager::prompt(std::string_view text) {
  terminal_->sputn(text.data(), static_cast<std::streamsize>(text.size()));
  terminal_->pubsync();
  if (!input_ended_) {
    std::string ignored;
    input_ended_ = !std::getline(in_, ignored);
  }
  rows_done_ = 0;
  column_ = 0;
}

bool Pager::put(char c) {
  const auto full = [this] { return !input_ended_ && rows_done_ >= rows_ - 1; };
  const auto byte = static_cast<unsigned char>(c);
  if (c == '\n') {
    if (full() && column_ == 0) {  // an empty line would scroll the first row away
      ++full_screens_;
      prompt("  [Enter: more]");
    }
    ++rows_done_;
    column_ = 0;
  } else if (c == '\r') {
    column_ = 0;
  } else if ((byte & 0xC0) != 0x80) {  // not the continuation of a UTF-8 character
    if (column_ == columns_) {         // the terminal wraps the line here
      ++rows_done_;
      column_ = 0;
    }
    if (full() && column_ == 0) {
      ++full_screens_;
      prompt("  [Enter: more]");
    }
    column_ = c == '\t' ? std::min(columns_, (column_ / 8 + 1) * 8) : column_ + 1;
  }
  return terminal_->sputc(c) != traits_type::eof();
}

Pager::int_type Pager::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  return put(traits_type::to_char_type(c)) ? c : traits_type::eof();
}

std::streamsize Pager::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) {
    if (!put(s[i])) return i;
  }
  return n;
}

int Pager::sync() { return terminal_->pubsync(); }

std::pair<int, int> terminal_size(int fd) {
  winsize size{};
  const bool known = ::ioctl(fd, TIOCGWINSZ, &size) == 0;
  return {known && size.ws_row > 0 ? size.ws_row : 24, known && size.ws_col > 0 ? size.ws_col : 80};
}

}  // namespace course
