// npy.cpp: reading and writing NumPy .npy files (format versions 1.0, 2.0, 3.0).
//
// The header is a Python dict literal. Rather than a general Python parser, the reader
// accepts exactly what NumPy writes (and reasonable hand-written variants): the three keys
// 'descr', 'fortran_order' and 'shape' in any order, with any spacing, and nothing else.
#include "course/npy.hpp"

#include "course/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>

namespace course {

static_assert(std::endian::native == std::endian::little,
              "the .npy writer stores little-endian data by copying memory");

namespace {

constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMagicSize = sizeof(kMagic);
constexpr std::size_t kAlign = 64;  // data starts on a 64-byte boundary (NumPy >= 1.14 writes this)
// NumPy's own limit (NPY_MAXDIMS in NumPy 2; 32 before). It also bounds the Fortran-order walk
// below, which costs rank steps per element, and the length of the header the writer makes.
constexpr std::size_t kMaxDims = 64;
// The longest header read: NumPy's default max_header_size (numpy.lib.format._MAX_HEADER_SIZE,
// 1.24 on), so np.load and read_npy accept the same headers. The longest NumPy writes for the
// dtypes read here (64 dimensions of up to 20 digits, padded to 64 bytes) is under 1.6 KB, so no
// real file comes near it; a version 2.0 length field can claim 4 GB, which is checked against
// this before a byte of the header is read or allocated.
constexpr std::size_t kMaxHeaderLen = 10000;
// The preamble before the header: magic, major, minor and the header length (2 bytes in version
// 1.0, 4 in 2.0 and 3.0).
constexpr std::size_t kPreamble1 = kMagicSize + 2 + 2;
constexpr std::size_t kPreamble2 = kMagicSize + 2 + 4;

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
    case NpyDtype::float32:
      return "<f4";
    case NpyDtype::float64:
      return "<f8";
    case NpyDtype::int32:
      return "<i4";
    case NpyDtype::int64:
      return "<i8";
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
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10)
        fail("dimension too large");
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

// The number of elements of an array of `shape` with elements of `esize` bytes, or nullopt when
// NumPy would refuse the shape: the non-zero dimensions times the element size must fit in a
// signed 64-bit byte count, even when another dimension is 0 and the array is empty. So no
// count wraps around (3 x 6148914691236517206 is not 2), every dimension fits an Eigen Index,
// and count * esize cannot overflow. The reader and the writer both ask this, so the writer
// never writes a file the reader refuses.
std::optional<std::size_t> element_count(std::span<const std::size_t> shape, std::size_t esize) {
  const auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::size_t nonzero_bytes = esize;
  bool empty = false;
  for (std::size_t d : shape) {
    if (d == 0) {
      empty = true;
    } else if (nonzero_bytes > max_bytes / d) {
      return std::nullopt;
    } else {
      nonzero_bytes *= d;
    }
  }
  return empty ? 0 : nonzero_bytes / esize;
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
    case NpyDtype::float32:
      return load_as_double<float>(p);
    case NpyDtype::float64:
      return load_as_double<double>(p);
    case NpyDtype::int32:
      return load_as_double<std::int32_t>(p);
    case NpyDtype::int64:
      return load_as_double<std::int64_t>(p);
  }
  return 0.0;
}

// ---- What a file promises -----------------------------------------------------------------------

// The preamble's facts: where the header starts and how long it says it is.
struct Preamble {
  std::size_t size;        // kPreamble1 or kPreamble2
  std::size_t header_len;  // at most kMaxHeaderLen
};

// Checks the first bytes of a file (all of them when it is shorter than kPreamble2) and reads
// the header length, refusing one above kMaxHeaderLen before anything is allocated for it.
Preamble parse_preamble(std::span<const unsigned char> bytes, const std::string& what) {
  if (bytes.size() < kPreamble1 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    throw NpyError(what + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  const unsigned major = bytes[6];
  const unsigned minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw NpyError(what + ": unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor));
  }
  const std::size_t size = major == 1 ? kPreamble1 : kPreamble2;
  if (bytes.size() < size) throw NpyError(what + ": truncated header");
  const std::size_t header_len = read_le(bytes.data() + 8, size - 8);
  if (header_len > kMaxHeaderLen) {
    throw NpyError(what + ": the header is " + std::to_string(header_len) +
                   " bytes, more than the " + std::to_string(kMaxHeaderLen) +
                   " a .npy header may have (NumPy's max_header_size)");
  }
  return {size, header_len};
}

// The header's facts, and the size of the data they imply.
struct Layout {
  Header header;
  std::size_t count;    // elements
  std::size_t payload;  // bytes: count * the element size, which cannot overflow
};

Layout parse_layout(std::string_view header_text, const std::string& what) {
  Header h = parse_header(header_text, what);
  const std::size_t esize = dtype_size(h.dtype);
  const std::optional<std::size_t> count = element_count(h.shape, esize);
  if (!count) throw NpyError(what + ": shape is too large");
  return {std::move(h), *count, *count * esize};
}

// `holds` is the data the file has after its header: a number, or "more than N" for a pipe.
[[noreturn]] void payload_mismatch(const Layout& l, const std::string& holds,
                                   const std::string& what) {
  throw NpyError(what + ": shape needs " + std::to_string(l.count) + " elements of " +
                 std::to_string(dtype_size(l.header.dtype)) + " bytes but the file holds " + holds +
                 " data bytes");
}

// The payload's l.payload bytes as an array, in C order.
NpyArray decode(const Layout& l, const unsigned char* src) {
  const Header& h = l.header;
  const std::size_t count = l.count, esize = dtype_size(h.dtype);
  NpyArray a;
  a.shape = h.shape;
  a.dtype = h.dtype;
  a.fortran_order = h.fortran_order;
  a.data.resize(count);
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

// ---- Reading a file -----------------------------------------------------------------------------

// A file descriptor, closed on every way out of read_npy.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads n bytes, fewer only at the end of the file: a pipe hands over what its writer has
// written so far, and a signal may interrupt read(2), so one call is not enough.
std::size_t read_upto(int fd, void* buffer, std::size_t n, const std::string& what) {
  auto* p = static_cast<unsigned char*>(buffer);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      throw NpyError(what + ": read error (" + std::strerror(errno) + ")");
    }
    got += static_cast<std::size_t>(r);
  }
  return got;
}

// The data after the header, l.payload bytes and nothing after them. `file_size` is the size of
// a regular file (nullopt for a pipe or a device); with it, a size that cannot match is refused
// before anything is read or allocated. Without it, the buffer grows only as bytes arrive, so a
// pipe whose header promises gigabytes and sends a few costs a few.
std::vector<unsigned char> read_payload(int fd, const Layout& l, std::size_t data_offset,
                                        std::optional<std::size_t> file_size,
                                        const std::string& what) {
  if (file_size && *file_size >= data_offset && *file_size - data_offset != l.payload) {
    payload_mismatch(l, std::to_string(*file_size - data_offset), what);
  }
  std::vector<unsigned char> payload;
  if (file_size) payload.reserve(l.payload);  // exactly what the file was just seen to hold
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  while (payload.size() < l.payload) {
    const std::size_t have = payload.size(), want = std::min(kChunk, l.payload - have);
    payload.resize(have + want);
    const std::size_t got = read_upto(fd, payload.data() + have, want, what);
    payload.resize(have + got);
    if (got < want) payload_mismatch(l, std::to_string(payload.size()), what);
  }
  unsigned char after;
  if (read_upto(fd, &after, 1, what) != 0) {
    payload_mismatch(l, "more than " + std::to_string(l.payload), what);
  }
  return payload;
}

}  // namespace

// ---- Writing ------------------------------------------------------------------------------------

namespace {

// The payload size of a shape the writer accepts: the reader's rules (at most kMaxDims
// dimensions, element_count), checked before anything is created. `where` names the caller.
std::size_t checked_payload(std::span<const std::size_t> shape, NpyDtype dtype, const char* where) {
  require(shape.size() <= kMaxDims, where, [&] {
    return "the shape has " + std::to_string(shape.size()) +
           " dimensions; a .npy file may have at most " + std::to_string(kMaxDims) +
           " (NumPy's limit)";
  });
  const std::optional<std::size_t> count = element_count(shape, dtype_size(dtype));
  require(count.has_value(), where, [&] {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
      text += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return "the shape " + text +
           ") is too large: its non-zero dimensions need more than 2^63 - 1 bytes (NumPy's "
           "limit, which read_npy applies)";
  });
  return *count * dtype_size(dtype);
}

// The bytes before the data: the preamble, then the dict padded with spaces and a '\n' so the
// data starts on a 64-byte boundary. write_npy and encode_npy both start with exactly these.
// Always version 1.0: with at most kMaxDims dimensions of at most 20 digits, the dict stays under
// 1.6 KB, far inside the uint16 length field (and kMaxHeaderLen).
std::string header_bytes(std::span<const std::size_t> shape, NpyDtype dtype, bool fortran_order) {
  std::string dict = std::string("{'descr': '") + dtype_descr(dtype) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";  // (3,) is a 1-tuple in Python
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  const std::size_t unpadded = kPreamble1 + dict.size() + 1;  // + the final '\n'
  const std::size_t total = (unpadded + kAlign - 1) / kAlign * kAlign;
  const std::size_t header_len = total - kPreamble1;
  std::string out(reinterpret_cast<const char*>(kMagic), kMagicSize);
  out += '\x01';  // version 1.0
  out += '\x00';
  out += static_cast<char>(header_len & 0xFF);  // little-endian uint16
  out += static_cast<char>(header_len >> 8);
  out += dict;
  out.append(total - unpadded, ' ');
  out += '\n';
  return out;
}

// The header, then `bytes` of data straight from `data`: no copy of the payload is made.
void write_file(const std::filesystem::path& path, std::span<const std::size_t> shape,
                NpyDtype dtype, const void* data, std::size_t bytes, bool fortran_order) {
  const std::string header = header_bytes(shape, dtype, fortran_order);
  AtomicFile file(path);
  file.write(header);
  file.write(data, bytes);
  file.commit();
}

template <typename T>
void write_elements(const std::filesystem::path& path, std::span<const std::size_t> shape,
                    std::span<const T> data, NpyDtype dtype) {
  const std::size_t bytes = checked_payload(shape, dtype, "write_npy");
  require(bytes / sizeof(T) == data.size(), "write_npy", [&] {
    return "shape holds " + std::to_string(bytes / sizeof(T)) + " elements but " +
           std::to_string(data.size()) + " were given";
  });
  write_file(path, shape, dtype, data.data(), bytes, false);
}

}  // namespace

// ---- Public API ---------------------------------------------------------------------------------

NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& what) {
  const Preamble p = parse_preamble(bytes, what);
  if (p.header_len > bytes.size() - p.size) {
    throw NpyError(what + ": header says " + std::to_string(p.header_len) +
                   " bytes but the file has " + std::to_string(bytes.size() - p.size));
  }
  const Layout l = parse_layout(
      std::string_view(reinterpret_cast<const char*>(bytes.data()) + p.size, p.header_len), what);
  const std::size_t data_offset = p.size + p.header_len;
  if (bytes.size() - data_offset != l.payload) {
    payload_mismatch(l, std::to_string(bytes.size() - data_offset), what);
  }
  return decode(l, bytes.data() + data_offset);
}

NpyArray read_npy(const std::filesystem::path& path, NpySource source) {
  const std::string what = path.string();
  // Opening a FIFO waits for a writer unless O_NONBLOCK says not to; the type is known only
  // once it is open. (A regular file ignores the flag.)
  const int nonblocking = source == NpySource::regular_file ? O_NONBLOCK : 0;
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | nonblocking));
  if (fd.get() < 0) {
    throw NpyError(what + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw NpyError(what + ": read error (" + std::strerror(errno) + ")");
  }
  if (source == NpySource::regular_file && !S_ISREG(st.st_mode)) {
    throw NpyError(what + ": not a regular file (" + file_kind(st.st_mode) + ")");
  }
  // A regular file's size is known before it is read; a pipe's or a device's is not.
  const std::optional<std::size_t> file_size =
      S_ISREG(st.st_mode) ? std::optional(static_cast<std::size_t>(st.st_size)) : std::nullopt;

  // The preamble: 10 bytes, and 2 more when the version says the length field has 4.
  unsigned char preamble[kPreamble2];
  std::size_t have = read_upto(fd.get(), preamble, kPreamble1, what);
  if (have == kPreamble1 && (preamble[6] == 2 || preamble[6] == 3)) {
    have += read_upto(fd.get(), preamble + kPreamble1, kPreamble2 - kPreamble1, what);
  }
  const Preamble p = parse_preamble({preamble, have}, what);

  // The header: p.header_len <= kMaxHeaderLen bytes, whatever the file holds.
  std::string header(p.header_len, '\0');
  const std::size_t got = read_upto(fd.get(), header.data(), p.header_len, what);
  if (got < p.header_len) {
    throw NpyError(what + ": header says " + std::to_string(p.header_len) +
                   " bytes but the file has " + std::to_string(got));
  }
  const Layout l = parse_layout(header, what);

  // The data: exactly the shape's bytes, then the end of the file.
  try {
    const std::vector<unsigned char> payload =
        read_payload(fd.get(), l, p.size + p.header_len, file_size, what);
    return decode(l, payload.data());
  } catch (const std::bad_alloc&) {
    // A shape NumPy allows can still be more than this machine holds: a fault of the file (for
    // this machine), reported like the others rather than as an exception nobody expects.
    throw NpyError(what + ": the array's " + std::to_string(l.count) +
                   " elements do not fit in memory");
  }
}

std::vector<unsigned char> encode_npy(std::span<const std::size_t> shape, NpyDtype dtype,
                                      const void* data, bool fortran_order) {
  const std::size_t nbytes = checked_payload(shape, dtype, "encode_npy");
  require(data != nullptr || nbytes == 0, "encode_npy", [&] {
    return "data is null but the shape holds " + std::to_string(nbytes / dtype_size(dtype)) +
           " elements";
  });
  const std::string header = header_bytes(shape, dtype, fortran_order);
  // Filled by position; GCC 12 misreads the equivalent chain of vector::insert calls as an
  // overflow (-Wstringop-overflow false positive).
  std::vector<unsigned char> out(header.size() + nbytes);
  std::memcpy(out.data(), header.data(), header.size());
  if (nbytes > 0) std::memcpy(out.data() + header.size(), data, nbytes);
  return out;
}

void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const float> data) {
  write_elements(path, shape, data, NpyDtype::float32);
}

void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const double> data) {
  write_elements(path, shape, data, NpyDtype::float64);
}

void write_npy(const std::filesystem::path& path, const Matrix& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()),
                               static_cast<std::size_t>(m.cols())};
  write_npy(path, shape, std::span<const float>(m.data(), static_cast<std::size_t>(m.size())));
}

void write_npy(const std::filesystem::path& path, const MatrixD& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()),
                               static_cast<std::size_t>(m.cols())};
  write_npy(path, shape, std::span<const double>(m.data(), static_cast<std::size_t>(m.size())));
}

void write_npy_fortran(const std::filesystem::path& path, const Eigen::MatrixXf& m) {
  const std::size_t shape[] = {static_cast<std::size_t>(m.rows()),
                               static_cast<std::size_t>(m.cols())};
  // Eigen's column-major storage is already the Fortran-order payload.
  write_file(path, shape, NpyDtype::float32, m.data(),
             checked_payload(shape, NpyDtype::float32, "write_npy_fortran"), true);
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
  require(
      shape.size() == 3, "NpyArray::slice",
      "expected a 3-D array [B, rows, cols], got " + std::to_string(shape.size()) + " dimensions");
  require(b < shape[0], "NpyArray::slice",
          "slice " + std::to_string(b) + " of " + std::to_string(shape[0]));
  const std::size_t per = shape[1] * shape[2];
  Matrix m(static_cast<Index>(shape[1]), static_cast<Index>(shape[2]));
  for (std::size_t i = 0; i < per; ++i) m.data()[i] = static_cast<float>(data[b * per + i]);
  return m;
}

Batch NpyArray::to_batch() const {
  require(
      shape.size() == 3, "NpyArray::to_batch",
      "expected a 3-D array [B, rows, cols], got " + std::to_string(shape.size()) + " dimensions");
  Batch out(static_cast<Index>(shape[0]), static_cast<Index>(shape[1]),
            static_cast<Index>(shape[2]));  // [B, rows, cols]: the same C order as the file
  for (std::size_t i = 0; i < data.size(); ++i) out.data().data()[i] = static_cast<float>(data[i]);
  return out;
}

}  // namespace course
