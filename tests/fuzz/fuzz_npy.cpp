// fuzz_npy.cpp: the libFuzzer target for course::parse_npy, the .npy reader's in-memory entry.
//
//   scripts/fuzz.sh [SECONDS]                      build (the `fuzz` preset, clang++) and fuzz
//   build/fuzz/bin/fuzz_npy build/fuzz/findings/X  replay one input
//
// Every input must end in one of two ways: a parse that satisfies the invariants below, or an
// course::NpyError whose message names the source and is fit to print. Anything else is a
// finding: a crash, a sanitizer report, a hang, another exception type, or a broken invariant
// (reported on stderr, then abort() so that libFuzzer keeps the input).
#include "course/npy.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr const char* kWhat = "fuzz-input";

// An error message quotes at most a few short excerpts of the header (npy.cpp), so this
// bounds it whatever the input; far more would mean the file itself is being echoed.
constexpr std::size_t kMaxMessage = 1024;

[[noreturn]] void finding(const char* invariant, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_npy: FINDING: %s%s%s\n", invariant, detail.empty() ? "" : ": ",
               detail.c_str());
  std::abort();
}

void check(bool ok, const char* invariant, const std::string& detail = "") {
  if (!ok) finding(invariant, detail);
}

std::size_t dtype_bytes(course::NpyDtype t) {
  return t == course::NpyDtype::float32 || t == course::NpyDtype::int32 ? 4 : 8;
}

// The elements narrowed back to the file's dtype, as raw little-endian bytes. Exact, because
// the reader widened each one from that dtype to double; the one exception is an int64 near
// 2^63, which rounds to 2^63 exactly and cannot be converted back (no round trip then).
std::optional<std::vector<unsigned char>> narrow(course::NpyDtype t, const std::vector<double>& v) {
  const std::size_t w = dtype_bytes(t);
  std::vector<unsigned char> out(v.size() * w);
  for (std::size_t i = 0; i < v.size(); ++i) {
    unsigned char* p = out.data() + i * w;
    switch (t) {
      case course::NpyDtype::float32: {
        const float x = static_cast<float>(v[i]);
        std::memcpy(p, &x, w);
        break;
      }
      case course::NpyDtype::float64:
        std::memcpy(p, &v[i], w);
        break;
      case course::NpyDtype::int32: {
        check(v[i] >= -2147483648.0 && v[i] <= 2147483647.0, "an int32 element is out of range");
        const auto x = static_cast<std::int32_t>(v[i]);
        std::memcpy(p, &x, w);
        break;
      }
      case course::NpyDtype::int64: {
        if (!(v[i] >= -9223372036854775808.0 && v[i] < 9223372036854775808.0)) return std::nullopt;
        const auto x = static_cast<std::int64_t>(v[i]);
        std::memcpy(p, &x, w);
        break;
      }
    }
  }
  return out;
}

// C order -> Fortran order, computed independently of the reader's odometer walk: the
// Fortran position of each element from its multi-index by division.
std::vector<double> to_fortran(const std::vector<std::size_t>& shape,
                               const std::vector<double>& c) {
  std::vector<double> f(c.size());
  for (std::size_t fi = 0; fi < c.size(); ++fi) {
    std::size_t rest = fi;  // first index fastest
    std::vector<std::size_t> idx(shape.size());
    for (std::size_t k = 0; k < shape.size(); ++k) {
      idx[k] = rest % shape[k];
      rest /= shape[k];
    }
    std::size_t ci = 0;  // last index fastest
    for (std::size_t k = 0; k < shape.size(); ++k) ci = ci * shape[k] + idx[k];
    f[fi] = c[ci];
  }
  return f;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// What must hold for every array the reader accepts.
void check_accepted(const course::NpyArray& a, std::size_t input_size) {
  std::size_t product = 1;
  for (std::size_t d : a.shape) {
    check(d == 0 || product <= SIZE_MAX / d, "an accepted shape overflows size_t");
    product *= d;
  }
  check(product == a.data.size(), "shape product != number of elements",
        std::to_string(product) + " vs " + std::to_string(a.data.size()));
  check(a.data.size() <= input_size / dtype_bytes(a.dtype), "more elements than the input holds");

  // NumPy's limits: at most 64 dimensions, and the non-zero dimensions times the element size
  // fit in a signed 64-bit byte count even when another dimension is 0 (so each fits an Index).
  check(a.shape.size() <= 64, "more dimensions than NumPy allows");
  std::size_t nonzero_bytes = dtype_bytes(a.dtype);
  for (std::size_t d : a.shape) {
    if (d == 0) continue;
    check(nonzero_bytes <= std::numeric_limits<std::ptrdiff_t>::max() / d,
          "an accepted shape is larger than NumPy allows");
    nonzero_bytes *= d;
  }

  // The views the course reads arrays through agree with the shape.
  const std::vector<std::size_t>& s = a.shape;
  if (s.size() <= 2) {
    const attn::MatrixD m = a.to_matrix_d();
    const std::size_t rows = s.size() == 2 ? s[0] : 1;
    const std::size_t cols = s.empty() ? 1 : s.back();
    check(m.rows() >= 0 && m.cols() >= 0 && static_cast<std::size_t>(m.rows()) == rows &&
              static_cast<std::size_t>(m.cols()) == cols,
          "to_matrix_d disagrees with the shape",
          std::to_string(m.rows()) + " x " + std::to_string(m.cols()));
  } else if (s.size() == 3) {
    check(a.to_batch().shape() == s, "to_batch disagrees with the shape");
    if (s[0] > 0) {
      const attn::Matrix last = a.slice(s[0] - 1);
      check(static_cast<std::size_t>(last.rows()) == s[1] &&
                static_cast<std::size_t>(last.cols()) == s[2],
            "slice disagrees with the shape");
    }
  }

  const std::optional<std::vector<unsigned char>> raw = narrow(a.dtype, a.data);
  if (!raw) return;

  // Round trip 1: the writer's C-order encoding of the same array reads back bit for bit.
  const auto c_bytes = course::encode_npy(a.shape, a.dtype, raw->data(), false);
  const course::NpyArray c = course::parse_npy(c_bytes, "re-encoded (C order)");
  check(c.shape == a.shape && c.dtype == a.dtype && !c.fortran_order,
        "C round trip: header differs");
  check(same_bits(c.data, a.data), "C round trip: elements differ");

  // Round trip 2: the same array stored in Fortran order reads back in the same C order.
  const auto f_raw = narrow(a.dtype, to_fortran(a.shape, a.data));
  check(f_raw.has_value(), "Fortran round trip: narrowing failed where C order succeeded");
  const auto f_bytes = course::encode_npy(a.shape, a.dtype, f_raw->data(), true);
  const course::NpyArray f = course::parse_npy(f_bytes, "re-encoded (Fortran order)");
  check(f.shape == a.shape && f.dtype == a.dtype && f.fortran_order,
        "Fortran round trip: header differs");
  check(same_bits(f.data, a.data), "Fortran round trip: elements differ");
}

// What must hold for every rejection: the message names the source, stays short and is plain
// printable ASCII (no raw header bytes, no terminal control characters).
void check_rejected(const course::NpyError& e) {
  const std::string m = e.what();
  check(m.find(kWhat) != std::string::npos, "the message does not name the source", m);
  check(m.size() <= kMaxMessage, "the message is too long",
        std::to_string(m.size()) + " bytes: " + m.substr(0, 200) + "...");
  for (unsigned char ch : m) {
    if (ch < 0x20 || ch > 0x7E) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", ch);
      finding("the message has an unprintable byte", hex + (" in: " + m.substr(0, 200)));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<course::NpyArray> a;
  try {
    a = course::parse_npy(std::span<const unsigned char>(data, size), kWhat);
  } catch (const course::NpyError& e) {
    check_rejected(e);
    return 0;
  } catch (const std::exception& e) {
    finding("an exception other than NpyError", e.what());
  } catch (...) {
    finding("a non-standard exception");
  }
  try {
    check_accepted(*a, size);
  } catch (const std::exception& e) {
    finding("checking an accepted array threw", e.what());
  }
  return 0;
}
