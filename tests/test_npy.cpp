// The .npy reader and writer: exact round trips, NumPy itself as the judge of the format,
// and a clear NpyError for every kind of malformed file.
#include "course/npy.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// A fresh, empty folder per test, removed afterwards.
class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("attn_npy_") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<unsigned char> bytes_of(const std::string& s) {
  return std::vector<unsigned char>(s.begin(), s.end());
}

// A version 1.0 file with the given header dict and raw payload, padded like NumPy does.
std::vector<unsigned char> handmade(const std::string& dict, const std::string& payload,
                                    int major = 1) {
  const std::size_t pre = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((pre + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY") + char(major) + '\0';
  const std::size_t n = header.size();
  out += char(n & 0xFF);
  out += char((n >> 8) & 0xFF);
  if (major != 1) out += std::string("\0\0", 2);
  return bytes_of(out + header + payload);
}

std::string raw_floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

void expect_npy_error(const std::vector<unsigned char>& bytes, const std::string& fragment) {
  try {
    course::parse_npy(bytes, "case");
    FAIL() << "expected NpyError mentioning '" << fragment << "'";
  } catch (const course::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("case"), std::string::npos)
        << "the error must name the source: " << e.what();
  }
}

// Debian's Python (python3-numpy), not whatever python3 is first on PATH.
constexpr const char* kPython = "/usr/bin/python3";

bool numpy_available() {
  static const bool ok =
      std::system((std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

int run_python(const fs::path& script_file, const std::string& script, const fs::path& cwd) {
  std::ofstream(script_file) << script;
  const std::string cmd = "cd '" + cwd.string() + "' && " + kPython + " '" + script_file.string() + "'";
  return std::system(cmd.c_str());
}

}  // namespace

// ---- Round trips through our own reader ---------------------------------------------------------

TEST_F(NpyTest, FloatMatrixRoundTripsBitExactly) {
  attn::Matrix m(2, 3);
  m << 1.0f, -2.5f, 3.25f, std::numeric_limits<float>::denorm_min(), 1e30f, -0.0f;
  course::write_npy(dir_ / "m.npy", m);
  const course::NpyArray a = course::read_npy(dir_ / "m.npy");
  EXPECT_EQ(a.dtype, course::NpyDtype::float32);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_FALSE(a.fortran_order);
  const attn::Matrix back = a.to_matrix();
  ASSERT_EQ(back.rows(), 2);
  ASSERT_EQ(back.cols(), 3);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(std::memcmp(&back.data()[i], &m.data()[i], 4), 0) << "element " << i;
  }
}

TEST_F(NpyTest, DoubleMatrixRoundTripsExactly) {
  attn::MatrixD m(3, 2);
  m << 0.1, 0.2, 1.0 / 3.0, -1e-300, 1e300, 2.0;
  course::write_npy(dir_ / "d.npy", m);
  const course::NpyArray a = course::read_npy(dir_ / "d.npy");
  EXPECT_EQ(a.dtype, course::NpyDtype::float64);
  EXPECT_EQ(a.to_matrix_d(), m);
}

TEST_F(NpyTest, HeaderIsPaddedTo64BytesAndEndsInNewline) {
  const std::size_t shape[] = {4, 2};
  const float data[8] = {};
  const auto bytes = course::encode_npy(shape, course::NpyDtype::float32, data);
  const std::size_t header_len = bytes[8] | (bytes[9] << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_EQ(bytes.size(), 10 + header_len + 8 * 4);
  const std::string header(bytes.begin() + 10, bytes.begin() + 10 + static_cast<long>(header_len));
  EXPECT_EQ(header.find("'shape': (4, 2)"), header.find("'shape'"));
}

TEST_F(NpyTest, OneDimensionalShapeIsAPythonOneTuple) {
  const std::size_t shape[] = {3};
  const float data[3] = {1, 2, 3};
  const auto bytes = course::encode_npy(shape, course::NpyDtype::float32, data);
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("'shape': (3,)"), std::string::npos);
  const course::NpyArray a = course::parse_npy(bytes);
  EXPECT_EQ(a.to_matrix().rows(), 1);  // documented: 1-D becomes [1 x n]
  EXPECT_EQ(a.to_matrix().cols(), 3);
}

TEST_F(NpyTest, FortranOrderIsReadBackInCOrder) {
  Eigen::MatrixXf col_major(2, 3);  // column-major storage: 1 4 2 5 3 6 in memory
  col_major << 1, 2, 3, 4, 5, 6;
  course::write_npy_fortran(dir_ / "f.npy", col_major);
  const course::NpyArray a = course::read_npy(dir_ / "f.npy");
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(a.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST_F(NpyTest, ThreeDimensionalFortranOrderScattersEveryIndex) {
  // A [2, 2, 3] array whose value encodes its index: v = 100 i + 10 j + k. In Fortran order
  // the file lists i fastest, then j, then k.
  std::string payload;
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) payload += raw_floats({float(100 * i + 10 * j + k)});
  const auto a = course::parse_npy(
      handmade("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2, 3), }", payload));
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) expected.push_back(100 * i + 10 * j + k);
  EXPECT_EQ(a.data, expected);
  EXPECT_EQ(a.slice(1)(1, 2), 112.0f);
}

TEST_F(NpyTest, NdimWriteAndSlices) {
  const std::size_t shape[] = {2, 2, 2};
  const std::vector<float> data = {0, 1, 2, 3, 4, 5, 6, 7};
  course::write_npy(dir_ / "t.npy", shape, data);
  const course::NpyArray a = course::read_npy(dir_ / "t.npy");
  attn::Matrix expected(2, 2);
  expected << 4, 5, 6, 7;
  EXPECT_EQ(a.slice(1), expected);
  EXPECT_THROW(a.slice(2), std::invalid_argument);
  EXPECT_THROW(a.to_matrix(), std::invalid_argument);
}

TEST_F(NpyTest, WriteRejectsShapeThatDisagreesWithData) {
  const std::size_t shape[] = {2, 3};
  const std::vector<float> five(5);
  EXPECT_THROW(course::write_npy(dir_ / "x.npy", shape, five), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_ / "x.npy"));
}

TEST_F(NpyTest, FailedWriteLeavesNothingBehind) {
  attn::Matrix m = attn::Matrix::Zero(1, 1);
  EXPECT_THROW(course::write_npy(dir_ / "no_such_folder" / "m.npy", m), course::NpyError);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(NpyTest, HeaderVersion2AndOddSpacingAreAccepted) {
  const auto a = course::parse_npy(
      handmade("{ \"shape\" :(2,),'fortran_order':False ,'descr':'<f4'}", raw_floats({7, 8}), 2));
  EXPECT_EQ(a.data, (std::vector<double>{7, 8}));
}

TEST_F(NpyTest, IntegerAndScalarArrays) {
  std::string payload(8, '\0');
  const std::int64_t v = -(std::int64_t{1} << 40);
  std::memcpy(payload.data(), &v, 8);
  const auto a = course::parse_npy(handmade("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", payload));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data, (std::vector<double>{-1099511627776.0}));
  EXPECT_EQ(a.to_matrix_d()(0, 0), -1099511627776.0);
}

TEST_F(NpyTest, EmptyArray) {
  const auto a = course::parse_npy(handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.to_matrix().rows(), 0);
  EXPECT_EQ(a.to_matrix().cols(), 3);
}

// ---- Malformed input: every fault is an NpyError that says what is wrong ------------------------

TEST(NpyMalformed, RejectsEachFaultWithAClearMessage) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = raw_floats({1, 2});

  expect_npy_error(bytes_of(""), "not a .npy file");
  expect_npy_error(bytes_of("PK\x03\x04 a zip file"), "not a .npy file");
  auto bad_version = handmade(ok_dict, two);
  bad_version[6] = 9;
  expect_npy_error(bad_version, "unsupported .npy format version 9.0");
  auto lying_length = handmade(ok_dict, two);
  lying_length[9] = 0x7F;  // header length 32 K in a 72-byte file
  expect_npy_error(lying_length, "header says");
  expect_npy_error(handmade(ok_dict, two.substr(0, 7)), "holds 7 data bytes");
  expect_npy_error(handmade(ok_dict, two + "x"), "holds 9 data bytes");
  expect_npy_error(handmade("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two),
                   "big-endian");
  expect_npy_error(handmade("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two),
                   "unsupported dtype '<c8'");
  expect_npy_error(handmade("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", two),
                   "unsupported dtype");
  expect_npy_error(handmade("{'descr': '<f4', 'shape': (2,), }", two), "needs the keys");
  expect_npy_error(handmade("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", two),
                   "duplicate key");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", two),
                   "True or False");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two),
                   "unexpected key");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", two),
                   "expected a dimension");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", two),
                   "after the closing");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", two),
                   "malformed");
  // 2^32 * 2^32 elements would wrap a 64-bit count around to 0 and "match" an empty payload.
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (4294967296, 4294967296), }", ""),
                   "too large");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (99999999999999999999999,), }", ""),
                   "too large");
}

// Found by tests/fuzz/fuzz_npy.cpp (its first input, a NumPy file missing 'fortran_order'): the
// message quoted the whole header, NumPy's padding and final '\n' included, and would have
// quoted any raw bytes of a corrupt file (terminal escapes, NULs, kilobytes of junk) just the same.
TEST(NpyMalformed, MessageQuotesAShortPrintableExcerptOfTheHeader) {
  const auto printable = [](const std::string& m) {
    for (unsigned char c : m) {
      if (c < 0x20 || c > 0x7E) return false;
    }
    return true;
  };
  const std::string two = raw_floats({1, 2});
  try {
    course::parse_npy(handmade("{'descr': '<f4', 'shape': (2,), }", two), "case");
    FAIL();
  } catch (const course::NpyError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(printable(m)) << m;
    EXPECT_EQ(m.substr(m.size() - 3), ", }") << "padding quoted: [" << m << "]";
  }

  try {  // a dtype made of an escape sequence, a NUL and a byte that is not ASCII
    course::parse_npy(handmade(std::string("{'descr': '\x1b[2J\0\xff', 'fortran_order': False, "
                                         "'shape': (1,), }", 56),
                             two.substr(0, 4)),
                    "case");
    FAIL();
  } catch (const course::NpyError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(printable(m)) << m;
    EXPECT_NE(m.find("unsupported dtype '\\x1B[2J\\x00\\xFF'"), std::string::npos) << m;
  }

  // 3,000 bytes of header with every byte value: the message stays a line long. The bound:
  // 'case' + the fixed text + a 120-character excerpt at up to 4 characters per byte.
  std::string junk = "{'descr': '<f4', ";
  for (int i = 0; junk.size() < 3000; ++i) junk += static_cast<char>(i % 256);
  try {
    course::parse_npy(handmade(junk, ""), "case");
    FAIL();
  } catch (const course::NpyError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(printable(m)) << m;
    EXPECT_LT(m.size(), 600u) << m;
    EXPECT_NE(m.find("... (3"), std::string::npos) << "says how long the header was: " << m;
  }
}

// Found by comparing the fuzzer's corpus with numpy.load, then by tests/fuzz/fuzz_npy.cpp once
// it checked NumPy's sizing rule and the views: a 0 in the shape made the element count 0, and
// the dimensions after it went unchecked. '(0, 18446744073709551615)' was accepted as an empty
// array, and to_matrix() turned it into a matrix with -1 columns (Eigen's assert, or worse).
// NumPy rejects it: the non-zero dimensions times the element size must fit in int64.
TEST(NpyMalformed, EmptyArrayWithAnOversizedDimensionIsRejected) {
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (0, 18446744073709551615), }", ""),
                   "too large");
  expect_npy_error(handmade("{'descr': '<f8', 'fortran_order': True, "
                            "'shape': (4294967296, 0, 4294967296), }", ""),
                   "too large");
  // 2^60 - 1 doubles are 2^63 - 8 bytes, just inside the limit; 2^60 doubles are not.
  const auto a = course::parse_npy(handmade("{'descr': '<f8', 'fortran_order': False, "
                                          "'shape': (0, 1152921504606846975), }", ""));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.to_matrix_d().rows(), 0);
  EXPECT_EQ(a.to_matrix_d().cols(), 1152921504606846975);
  expect_npy_error(handmade("{'descr': '<f8', 'fortran_order': False, "
                            "'shape': (0, 1152921504606846976), }", ""),
                   "too large");
}

// Found by review while writing the fuzz target (its inputs are too short to show it): any
// number of dimensions was accepted, and the Fortran-order walk costs one step per dimension
// per element, so a few megabytes of '1, 1, 1, ...' and data kept the reader busy for hours.
// NumPy itself stops at 64 dimensions; so does the reader now.
TEST(NpyMalformed, MoreThan64DimensionsAreRejectedAnd64AreRead) {
  std::string dims;
  for (int i = 0; i < 63; ++i) dims += "1, ";
  const auto a = course::parse_npy(handmade(
      "{'descr': '<f4', 'fortran_order': True, 'shape': (" + dims + "2), }", raw_floats({5, 6})));
  EXPECT_EQ(a.shape.size(), 64u);
  EXPECT_EQ(a.shape.back(), 2u);
  EXPECT_EQ(a.data, (std::vector<double>{5, 6}));
  expect_npy_error(
      handmade("{'descr': '<f4', 'fortran_order': True, 'shape': (" + dims + "1, 2), }",
               raw_floats({5, 6})),
      "more than 64 dimensions");
}

// Found by review: libstdc++'s filebuf throws std::ios_base::failure when read(2) fails, and
// read_npy let it escape instead of an NpyError. Opening a folder succeeds; reading it fails.
TEST_F(NpyTest, ReadingAFolderIsAnNpyErrorNamingIt) {
  try {
    course::read_npy(dir_);
    FAIL() << "read_npy accepted a folder";
  } catch (const course::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("read error"), std::string::npos) << e.what();
  }
}

TEST(NpyMalformed, MissingFileNamesThePath) {
  try {
    course::read_npy("/nonexistent/folder/x.npy");
    FAIL();
  } catch (const course::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/folder/x.npy"), std::string::npos);
  }
}

// ---- NumPy is the judge -------------------------------------------------------------------------

TEST_F(NpyTest, NumPyReadsWhatWeWriteAndWeReadWhatNumPyWrites) {
  if (!numpy_available()) GTEST_SKIP() << kPython << " has no numpy (scripts/setup.sh installs it)";

  // Ours -> NumPy: NumPy loads each file and checks dtype, shape, order and every value.
  attn::Matrix f(2, 3);
  f << 1.5f, -2.0f, 3.0f, 4.0f, 0.1f, -0.0f;
  course::write_npy(dir_ / "ours_f4.npy", f);
  attn::MatrixD d(1, 2);
  d << 0.1, 1.0 / 3.0;
  course::write_npy(dir_ / "ours_f8.npy", d);
  Eigen::MatrixXf fo(2, 2);
  fo << 1, 2, 3, 4;
  course::write_npy_fortran(dir_ / "ours_fortran.npy", fo);
  const std::size_t shape3[] = {2, 1, 3};
  const std::vector<float> d3 = {0, 1, 2, 3, 4, 5};
  course::write_npy(dir_ / "ours_3d.npy", shape3, d3);

  const std::string script = R"PY(
import numpy as np, sys
def check(name, expected, dtype, fortran):
    with open(name, "rb") as f:  # the header as NumPy parses it
        assert np.lib.format.read_magic(f) == (1, 0), name
        shape, fortran_order, header_dtype = np.lib.format.read_array_header_1_0(f)
    assert (shape, fortran_order, header_dtype) == (expected.shape, fortran, dtype), name
    a = np.load(name)
    assert np.array_equal(a, expected), (name, a)
check("ours_f4.npy", np.array([[1.5, -2, 3], [4, 0.1, -0.0]], np.float32), np.float32, False)
check("ours_f8.npy", np.array([[0.1, 1/3]]), np.float64, False)
check("ours_fortran.npy", np.array([[1, 2], [3, 4]], np.float32), np.float32, True)
check("ours_3d.npy", np.arange(6, dtype=np.float32).reshape(2, 1, 3), np.float32, False)
# NumPy -> ours: every dtype, order and header version the reader claims to support.
m = np.array([[1.25, -2.5, 3.0], [4.0, 5.5, -6.0]])
np.save("np_f4_c.npy", m.astype(np.float32))
np.save("np_f8_f.npy", np.asfortranarray(m))
np.save("np_i4.npy", np.array([[-7, 8, 9]], np.int32))
np.save("np_i8_3d.npy", np.arange(12, dtype=np.int64).reshape(2, 3, 2))
np.save("np_scalar.npy", np.float64(2.75))
with open("np_v2.npy", "wb") as f:
    np.lib.format.write_array(f, m.astype(np.float32), version=(2, 0))
with open("np_v3.npy", "wb") as f:
    np.lib.format.write_array(f, m, version=(3, 0))
)PY";
  ASSERT_EQ(run_python(dir_ / "judge.py", script, dir_), 0) << "NumPy rejected one of our files";

  attn::MatrixD m(2, 3);
  m << 1.25, -2.5, 3.0, 4.0, 5.5, -6.0;
  EXPECT_EQ(course::read_npy(dir_ / "np_f4_c.npy").to_matrix_d(), m);
  const auto fortran = course::read_npy(dir_ / "np_f8_f.npy");
  EXPECT_TRUE(fortran.fortran_order);
  EXPECT_EQ(fortran.to_matrix_d(), m);
  EXPECT_EQ(course::read_npy(dir_ / "np_i4.npy").data, (std::vector<double>{-7, 8, 9}));
  const auto i8 = course::read_npy(dir_ / "np_i8_3d.npy");
  EXPECT_EQ(i8.shape, (std::vector<std::size_t>{2, 3, 2}));
  EXPECT_EQ(i8.data[11], 11.0);
  EXPECT_EQ(course::read_npy(dir_ / "np_scalar.npy").data, (std::vector<double>{2.75}));
  EXPECT_EQ(course::read_npy(dir_ / "np_v2.npy").to_matrix_d(), m);
  EXPECT_EQ(course::read_npy(dir_ / "np_v3.npy").to_matrix_d(), m);
}
