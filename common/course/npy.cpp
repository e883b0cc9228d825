// npy.cpp: reading and writing NumPy .npy files (format versions 1.0, 2.0, 3.0).
//
// The header is a Python dict literal. Rather than a general Python parser, the reader
// accepts exactly what NumPy writes (and reasonable hand-written variants): the three keys
// 'descr', 'fortran_order' and 'shape' in any order, with any spacing, and nothing else.
#include "course/npy.hpp"

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

namespace course {

static_assert(std::endian::native == std::endian::little,
              "the .npy writer stores little-endian data by copying memory");

namespace {

constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMagicSize = sizeof(kMagic);
constexpr std::size_t kAlign = 64;  // data starts on a 64-byte boundary (NumPy >= 1.14 writes this)
// NumPy's own limit (NPY_MAXDIMS in NumPy 2; 32 before). It also bounds the Fortran-order walk
// below, which costs rank steps per element.
constexpr std::size_t kMaxDims = 64;

std::size_t dtype_size(NpyDtype t) {
  switch (t) {
    case NpyDtype::float32:
    case NpyDtype::int32:
      return 4;
    case NpyDtype::float64:
    case NpyDtype::int64:
      return 8;
  }
  return 0;
}

const char* dtype_descr(NpyDtype t) {
  switch (t) {
    case NpyDtype::float32: return "<f4";
    case NpyDtype::float64: return "<f8";
    case NpyDtype::int32: return "<i4";
    case NpyDtype::int64: return "<i8";
  }
  return "";
}

// ---- Header parsing -----------------------------------------------------------------------------

// Header text as it may appear in an error message: at most `limit` characters, anything
// outside printable ASCII as \xNN, so a corrupt file can neither flood the message nor put
// control characters into a terminal.
std::string excerpt(std::string_view s, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(c));
      out += hex;
    }
  }
  if (s.size() > limit) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// A cursor over the header dict with just the moves the format needs. Every failure
// throws NpyError naming the source, so callers never see a half-parsed header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  // Quotes the header without NumPy's padding (spaces and the final '\n').
  [[noreturn]] void fail(const std::string& why) const {
    const std::size_t end = s_.find_last_not_of(" \t\n\r\f\v");
    const std::string_view text = s_.substr(0, end == std::string_view::npos ? 0 : end + 1);
    throw NpyError(what_ + ": malformed .npy header (" + why + "): " + excerpt(text, 120));
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool consume(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool consume_word(std::string_view w) {
    skip_space();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  std::string quoted() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a string");
    const char quote = s_[pos_++];
    const std::size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  std::size_t integer() {
    skip_space();
    std::size_t value = 0;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const std::size_t digit = static_cast<std::size_t>(s_[pos_] - '0');
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("dimension too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail("expected a dimension");
    // NumPy may write Python 2 longs as "3L".
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    return value;
  }

  bool at_end() {
    skip_space();
    return pos_ == s_.size();
  }

 private:
  std::string_view s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

struct Header {
  NpyDtype dtype;
  bool fortran_order;
  std::vector<std::size_t> shape;
};

NpyDtype parse_descr(const std::string& d, const HeaderParser& p) {
  // '|' (not applicable) never occurs for these multi-byte types; '=' means native, which
  // is little-endian wherever this library builds (static_assert above).
  if (d == "<f4" || d == "=f4") return NpyDtype::float32;
  if (d == "<f8" || d == "=f8") return NpyDtype::float64;
  if (d == "<i4" || d == "=i4") return NpyDtype::int32;
  if (d == "<i8" || d == "=i8") return NpyDtype::int64;
  if (!d.empty() && d[0] == '>') {
    p.fail("big-endian dtype '" + excerpt(d, 20) + "' is not supported");
  }
  p.fail("unsupported dtype '" + excerpt(d, 20) + "' (supported: <f4, <f8, <i4, <i8)");
}

Header parse_header(std::string_view text, const std::string& what) {
  HeaderParser p(text, what);
  std::optional<NpyDtype> dtype;
  std::optional<bool> fortran;
  std::optional<std::vector<std::size_t>> shape;

  p.expect('{');
  while (!p.consume('}')) {
    const std::string key = p.quoted();
    p.expect(':');
    if (key == "descr") {
      if (dtype) p.fail("duplicate key 'descr'");
      dtype = parse_descr(p.quoted(), p);
    } else if (key == "fortran_order") {
      if (fortran) p.fail("duplicate key 'fortran_order'");
      if (p.consume_word("True")) {
        fortran = true;
      } else if (p.consume_word("False")) {
        fortran = false;
      } else {
        p.fail("fortran_order must be True or False");
      }
    } else if (key == "shape") {
      if (shape) p.fail("duplicate key 'shape'");
      shape.emplace();
      p.expect('(');
      while (!p.consume(')')) {
        shape->push_back(p.integer());
        if (shape->size() > kMaxDims) {
          p.fail("more than " + std::to_string(kMaxDims) + " dimensions");
        }
        if (!p.consume(',') && !p.peek(')')) p.fail("expected ',' or ')' in shape");
      }
    } else {
      p.fail("unexpected key '" + excerpt(key, 20) + "'");
    }
    if (!p.consume(',') && !p.peek('}')) p.fail("expected ',' or '}'");
  }
  if (!p.at_end()) p.fail("text after the closing '}'");
  if (!dtype || !fortran || !shape) p.fail("needs the keys 'descr', 'fortran_order' and 'shape'");
  return {*dtype, *fortran, std::move(*shape)};
}

std::uint32_t read_le(const unsigned char* p, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

// ---- Element decoding ---------------------------------------------------------------------------

template <typename T>
double load_as_double(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<double>(v);
}

double load_element(NpyDtype t, const unsigned char* p) {
  switch (t) {
    case NpyDtype::float32: return load_as_double<float>(p);
    case NpyDtype::float64: return load_as_double<double>(p);
    case NpyDtype::int32: return load_as_double<std::int32_t>(p);
    case NpyDtype::int64: return load_as_double<std::int64_t>(p);
  }
  return 0.0;
}

// ---- Writing ------------------------------------------------------------------------------------

std::size_t element_count(std::span<const std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

void write_file_atomically(const std::filesystem::path& path,
                           const std::vector<unsigned char>& bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw NpyError("write_npy: cannot open " + tmp.string() + " for writing");
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      f.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw NpyError("write_npy: failed writing " + tmp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw NpyError("write_npy: cannot move " + tmp.string() + " to " + path.string());
  }
}

}  // namespace

// ---- Public API ---------------------------------------------------------------------------------

NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& what) {
  if (bytes.size() < kMagicSize + 4 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    throw NpyError(what + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  const unsigned major = bytes[6];
  const unsigned minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw NpyError(what + ": unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor));
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicSize + 2 + len_bytes) throw NpyError(what + ": truncated header");
  const std::size_t header_len = read_le(bytes.data() + 8, len_bytes);
  const std::size_t data_offset = kMagicSize + 2 + len_bytes + header_len;
  if (data_offset > bytes.size()) {
    throw NpyError(what + ": header says " + std::to_string(header_len) + " bytes but the file has " +
                   std::to_string(bytes.size() - (kMagicSize + 2 + len_bytes)));
  }
  const std::string_view header_text(reinterpret_cast<const char*>(bytes.data()) + kMagicSize + 2 +
                                         len_bytes,
                                     header_len);
  const Header h = parse_header(header_text, what);

  // Size the array as NumPy does: the non-zero dimensions times the element size must fit in a
  // signed 64-bit byte count, even when another dimension is 0 and the array is empty. So a
  // hostile shape cannot wrap around to a small count and pass the size test below, and an
  // empty (0, 2^64 - 1) array cannot reach Eigen as a matrix with -1 columns.
  const std::size_t esize = dtype_size(h.dtype);
  const auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::size_t nonzero_bytes = esize;
  bool empty = false;
  for (std::size_t d : h.shape) {
    if (d == 0) {
      empty = true;
    } else if (nonzero_bytes > max_bytes / d) {
      throw NpyError(what + ": shape is too large");
    } else {
      nonzero_bytes *= d;
    }
  }
  const std::size_t count = empty ? 0 : nonzero_bytes / esize;
  const std::size_t payload = bytes.size() - data_offset;
  if (count > payload / esize || count * esize != payload) {
    throw NpyError(what + ": shape needs " + std::to_string(count) + " elements of " +
                   std::to_string(esize) + " bytes but the file holds " + std::to_string(payload) +
                   " data bytes");
  }

  NpyArray a;
  a.shape = h.shape;
  a.dtype = h.dtype;
  a.fortran_order = h.fortran_order;
  a.data.resize(count);
  const unsigned char* src = bytes.data() + data_offset;
  if (!h.fortran_order || h.shape.size() < 2) {
    for (std::size_t i = 0; i < count; ++i) a.data[i] = load_element(h.dtype, src + i * esize);
    return a;
  }
  // Fortran order: the first index varies fastest in the file. Walk the file in its own
  // order and scatter each element to its C-order position.
  const std::size_t rank = h.shape.size();
  std::vector<std::size_t> c_stride(rank, 1);
  for (std::size_t k = rank - 1; k > 0; --k) c_stride[k - 1] = c_stride[k] * h.shape[k];
  std::vector<std::size_t> index(rank, 0);
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t c_pos = 0;
    for (std::size_t k = 0; k < rank; ++k) c_pos += index[k] * c_stride[k];
    a.data[c_pos] = load_element(h.dtype, src + i * esize);
    for (std::size_t k = 0; k < rank && ++index[k] == h.shape[k]; ++k) index[k] = 0;
  }
  return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NpyError(path.string() + ": cannot open for reading");
  std::vector<unsigned char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    // libstdc++'s filebuf throws when read(2) fails (a directory, an I/O error); the iterator
    // does not turn that into badbit the way istream::read would.
    throw NpyError(path.string() + ": read error (" + e.code().message() + ")");
  }
  if (f.bad()) throw NpyError(path.string() + ": read error");
  return parse_npy(bytes, path.string());
}

std::vector<unsigned char> encode_npy(std::span<const std::size_t> shape, NpyDtype dtype,
                                      const void* data, bool fortran_order) {
  std::string dict = std::string("{'descr': '") + dtype_descr(dtype) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";  // (3,) is a 1-tuple in Python
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";

  // Version 1.0 unless the header outgrows its uint16 length field.
  std::size_t preamble = kMagicSize + 2 + 2;
  unsigned major = 1;
  std::size_t total = preamble + dict.size() + 1;  // + the final '\n'
  if ((total + kAlign - 1) / kAlign * kAlign - preamble > 0xFFFF) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
    total = preamble + dict.size() + 1;
  }
  const std::size_t padded = (total + kAlign - 1) / kAlign * kAlign;
  dict.append(padded - total, ' ');
  dict += '\n';
  const std::size_t header_len = dict.size();

  // Fill a buffer of the final size by position; GCC 12 misreads the equivalent chain of
  // vector::insert calls as an overflow (-Wstringop-overflow false positive).
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t nbytes = element_count(shape) * dtype_size(dtype);
  std::vector<unsigned char> out(kMagicSize + 2 + len_bytes + header_len + nbytes);
  unsigned char* w = out.data();
  std::memcpy(w, kMagic, kMagicSize);
  w += kMagicSize;
  *w++ = static_cast<unsigned char>(major);
  *w++ = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) {
    *w++ = static_cast<unsigned char>((header_len >> (8 * i)) & 0xFF);
  }
  std::memcpy(w, dict.data(), header_len);
  w += header_len;
  if (nbytes > 0) std::memcpy(w, data, nbytes);
  return out;
}

void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const float> data) {
  require(element_count(shape) == data.size(), "write_npy",
          "shape holds " + std::to_string(element_count(shape)) + " elements but " +
              std::to_string(data.size()) + " were given");
  write_file_atomically(path, encode_npy(shape, NpyDtype::float32, data.data()));
}

void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const double> data) {
  require(element_count(shape) == data.size(), "write_npy",
          "shape holds " + std::to_string(element_count(shape)) + " elements but " +
              std::to_string(data.size()) + " were given");
  write_file_atomically(path, encode_npy(shape, NpyDtype::float64, data.data()));
}

void write_npy(const std::filesystem::path& path, const Matrix& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
  write_npy(path, shape, std::span<const float>(m.data(), static_cast<std::size_t>(m.size())));
}

void write_npy(const std::filesystem::path& path, const MatrixD& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
  write_npy(path, shape, std::span<const double>(m.data(), static_cast<std::size_t>(m.size())));
}

void write_npy_fortran(const std::filesystem::path& path, const Eigen::MatrixXf& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
  write_file_atomically(path, encode_npy(shape, NpyDtype::float32, m.data(), true));
}

// ---- NpyArray views -----------------------------------------------------------------------------

MatrixD NpyArray::to_matrix_d() const {
  Index rows = 1, cols = 1;
  if (shape.size() == 1) {
    cols = static_cast<Index>(shape[0]);
  } else if (shape.size() == 2) {
    rows = static_cast<Index>(shape[0]);
    cols = static_cast<Index>(shape[1]);
  } else {
    require(shape.empty(), "NpyArray::to_matrix",
            "expected a 0-, 1- or 2-D array, got " + std::to_string(shape.size()) + " dimensions");
  }
  MatrixD m(rows, cols);
  std::copy(data.begin(), data.end(), m.data());
  return m;
}

Matrix NpyArray::to_matrix() const { return to_matrix_d().cast<float>(); }

Matrix NpyArray::slice(std::size_t b) const {
  require(shape.size() == 3, "NpyArray::slice",
          "expected a 3-D array [B, rows, cols], got " + std::to_string(shape.size()) + " dimensions");
  require(b < shape[0], "NpyArray::slice",
          "slice " + std::to_string(b) + " of " + std::to_string(shape[0]));
  const std::size_t per = shape[1] * shape[2];
  Matrix m(static_cast<Index>(shape[1]), static_cast<Index>(shape[2]));
  for (std::size_t i = 0; i < per; ++i) m.data()[i] = static_cast<float>(data[b * per + i]);
  return m;
}

Batch NpyArray::to_batch() const {
  require(shape.size() == 3, "NpyArray::to_batch",
          "expected a 3-D array [B, rows, cols], got " + std::to_string(shape.size()) + " dimensions");
  Batch out(static_cast<Index>(shape[0]), static_cast<Index>(shape[1]),
            static_cast<Index>(shape[2]));  // [B, rows, cols]: the same C order as the file
  for (std::size_t i = 0; i < data.size(); ++i) out.data().data()[i] = static_cast<float>(data[i]);
  return out;
}

}  // namespace course
