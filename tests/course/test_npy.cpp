// The .npy reader and writer: exact round trips, NumPy itself as the judge of the format,
// a clear NpyError for every kind of malformed file, and bounded memory whatever the file is
// (a device, a pipe, a huge sparse file) or however much the writer is given.
#include "course/files.hpp"
#include "course/npy.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

// ---- The largest allocation ---------------------------------------------------------------------
// The reader and the writer promise memory bounded by what the array needs, not by what a file
// claims or by a second copy of the data. This file replaces its program's global operator new
// (every std::vector and std::string allocates through it) to record the largest single request
// made while a LargestAllocation is alive; the program's other suites allocate through it too,
// unrecorded. Eigen allocates with malloc directly, so a matrix made by a test is not counted.
namespace test_npy {
std::atomic<bool> g_watching{false};
std::atomic<std::size_t> g_largest{0};
}  // namespace test_npy

// Not inlined: GCC would otherwise see free() applied to the result of new at call sites and
// warn (-Wmismatched-new-delete), though these replacements pair malloc with free throughout.
[[gnu::noinline]] void* operator new(std::size_t size) {
  if (test_npy::g_watching.load(std::memory_order_relaxed)) {
    std::size_t seen = test_npy::g_largest.load(std::memory_order_relaxed);
    while (size > seen && !test_npy::g_largest.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace fs = std::filesystem;

namespace test_npy {

using attn_test::message_of;

class LargestAllocation {
 public:
  LargestAllocation() {
    g_largest = 0;
    g_watching = true;
  }
  ~LargestAllocation() { g_watching = false; }
  LargestAllocation(const LargestAllocation&) = delete;
  LargestAllocation& operator=(const LargestAllocation&) = delete;
  std::size_t bytes() const { return g_largest; }
};

// The bound the tests below hold the reader and the writer to. What they need for themselves is
// a header (at most 10000 bytes), a path and a message; 1 MiB is a hundred times that, and a
// thousandth of what the unbounded versions asked for (the whole file, or a copy of the data).
constexpr std::size_t kSmall = std::size_t{1} << 20;

// Ignores a signal while it lives: SIGPIPE (a write to a pipe nobody reads) and SIGXFSZ (a write
// past RLIMIT_FSIZE) would otherwise end the test program instead of failing the write(2).
class IgnoreSignal {
 public:
  explicit IgnoreSignal(int sig) : sig_(sig) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(sig_, &ignore, &old_);
  }
  ~IgnoreSignal() { ::sigaction(sig_, &old_, nullptr); }
  IgnoreSignal(const IgnoreSignal&) = delete;
  IgnoreSignal& operator=(const IgnoreSignal&) = delete;

 private:
  int sig_;
  struct sigaction old_ {};
};

// Lowers this process's file size limit while it lives: a disk that fills up, on demand.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lower = old_;
    lower.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lower);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old_); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
};

std::vector<unsigned char> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f),
                                    std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// What read_npy throws as NpyError, or "(no NpyError)".
std::string read_error(const fs::path& p) {
  try {
    course::read_npy(p);
  } catch (const course::NpyError& e) {
    return e.what();
  }
  return "(no NpyError)";
}

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

// A version 1.0 file whose header is exactly `header_len` bytes: the dict, spaces and a '\n'.
std::vector<unsigned char> with_header_len(const std::string& dict, std::size_t header_len,
                                           const std::string& payload) {
  std::string header = dict;
  header.append(header_len - dict.size() - 1, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01", 7) + '\0';
  out += char(header_len & 0xFF);
  out += char((header_len >> 8) & 0xFF);
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
  const std::string cmd =
      "cd '" + cwd.string() + "' && " + kPython + " '" + script_file.string() + "'";
  return std::system(cmd.c_str());
}

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
  try {
    course::write_npy(dir_ / "no_such_folder" / "m.npy", m);
    FAIL() << "no exception";
  } catch (const course::WriteError& e) {  // the system's reason, not just "failed"
    const std::string expected = "cannot write " + (dir_ / "no_such_folder" / "m.npy").string() +
                                 ": " + std::strerror(ENOENT);
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

// Issue 11: write_npy's errors said "failed writing" without the reason. Through AtomicFile a
// full disk is named as such. RLIMIT_FSIZE makes the disk "full" after 4096 bytes: the header
// (64) and the first 4032 bytes of the 8000-byte payload fit, the next write(2) fails with EFBIG.
TEST_F(NpyTest, AWriteThatDoesNotFitNamesTheReasonAndLeavesNothing) {
  const attn::Matrix m = attn::Matrix::Constant(100, 20, 1.0f);  // 8000 bytes of data
  const fs::path target = dir_ / "big.npy";
  {
    const IgnoreSignal no_sigxfsz(SIGXFSZ);
    const FileSizeLimit full_after(4096);
    try {
      course::write_npy(target, m);
      FAIL() << "no exception";
    } catch (const course::WriteError& e) {
      EXPECT_EQ(std::string(e.what()),
                "cannot write " + target.string() + ": " + std::strerror(EFBIG));
    }
  }
  EXPECT_TRUE(fs::is_empty(dir_)) << "the temporary file must be removed";
}

// Issue 11: write_npy built the whole file in a second buffer (encode_npy) before writing it, so
// a dump peaked at twice its data. Now the header is written, then the data straight from the
// caller's memory: an 8 MiB matrix is written without any allocation near its size.
TEST_F(NpyTest, WriteStreamsTheDataFromTheCallersMemory) {
  const attn::Matrix m = attn::Matrix::Constant(1024, 2048, 0.5f);  // 8 MiB, allocated by Eigen
  std::size_t largest = 0;
  {
    const LargestAllocation watch;
    course::write_npy(dir_ / "big.npy", m);
    largest = watch.bytes();
  }
  EXPECT_LT(largest, kSmall);
  // The dict "{'descr': '<f4', 'fortran_order': False, 'shape': (1024, 2048), }" is 65 bytes;
  // with the 10-byte preamble and the '\n' that is 76, padded to 128.
  EXPECT_EQ(fs::file_size(dir_ / "big.npy"), 128u + 1024u * 2048u * 4u);
  const course::NpyArray a = course::read_npy(dir_ / "big.npy");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{1024, 2048}));
  EXPECT_EQ(a.data.front(), 0.5);
  EXPECT_EQ(a.data.back(), 0.5);
}

// The streamed writer and encode_npy share the header code; their bytes must agree for every
// rank (0, 1, 2, 3 and the 64 NumPy allows, whose header is the longest), both dtypes, empty
// arrays and Fortran order. One case is also built by hand, independently of both.
TEST_F(NpyTest, WriteNpyWritesExactlyTheBytesOfEncodeNpy) {
  std::vector<std::vector<std::size_t>> shapes = {{}, {0}, {3}, {2, 3}, {2, 1, 3}, {0, 5}};
  shapes.emplace_back(64, 1);
  for (const auto& shape : shapes) {
    const std::size_t n = std::accumulate(shape.begin(), shape.end(), std::size_t{1},
                                          [](std::size_t a, std::size_t b) { return a * b; });
    std::vector<float> f(n);
    std::vector<double> d(n);
    std::iota(f.begin(), f.end(), 1.0f);
    std::iota(d.begin(), d.end(), -0.5);
    course::write_npy(dir_ / "f.npy", shape, f);
    course::write_npy(dir_ / "d.npy", shape, d);
    EXPECT_EQ(file_bytes(dir_ / "f.npy"),
              course::encode_npy(shape, course::NpyDtype::float32, f.data()))
        << shape.size() << " dimensions";
    EXPECT_EQ(file_bytes(dir_ / "d.npy"),
              course::encode_npy(shape, course::NpyDtype::float64, d.data()))
        << shape.size() << " dimensions";
  }
  attn::MatrixD md(2, 2);
  md << 1, 2, 3, 4;
  course::write_npy(dir_ / "md.npy", md);
  const std::size_t two_by_two[] = {2, 2};
  EXPECT_EQ(file_bytes(dir_ / "md.npy"),
            course::encode_npy(two_by_two, course::NpyDtype::float64, md.data()));
  Eigen::MatrixXf col_major(2, 3);
  col_major << 1, 2, 3, 4, 5, 6;
  course::write_npy_fortran(dir_ / "fortran.npy", col_major);
  const std::size_t two_by_three[] = {2, 3};
  EXPECT_EQ(file_bytes(dir_ / "fortran.npy"),
            course::encode_npy(two_by_three, course::NpyDtype::float32, col_major.data(), true));
  // By hand: NumPy's layout of np.array([1, 2, 3], np.float32) (handmade() pads as NumPy does).
  const std::size_t three[] = {3};
  const std::vector<float> v = {1, 2, 3};
  course::write_npy(dir_ / "v.npy", three, v);
  EXPECT_EQ(
      file_bytes(dir_ / "v.npy"),
      handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", raw_floats({1, 2, 3})));
}

// Issue 11: the writer multiplied the shape without overflow checks and allowed any rank, so
// 3 x 6148914691236517206 (2^64 + 2, wrapping to 2) matched two floats, and 65 dimensions were
// written; read_npy refuses both files. The writer now applies the reader's rules first, and
// throws before a file (or a temporary) exists.
TEST_F(NpyTest, WriteRefusesShapesTheReaderWouldRejectBeforeCreatingAFile) {
  const std::size_t wrapping[] = {3, 6148914691236517206};
  const std::vector<float> two = {1, 2};
  const std::string wrapped = message_of([&] { course::write_npy(dir_ / "w.npy", wrapping, two); });
  EXPECT_EQ(wrapped.rfind("write_npy: the shape (3, 6148914691236517206) is too large", 0), 0u)
      << wrapped;

  const std::vector<std::size_t> rank65(65, 1);
  const std::vector<float> one = {1};
  const std::string deep = message_of([&] { course::write_npy(dir_ / "r.npy", rank65, one); });
  EXPECT_EQ(deep.rfind("write_npy: the shape has 65 dimensions", 0), 0u) << deep;

  // NumPy's byte limit holds for empty arrays too (the reader test
  // EmptyArrayWithAnOversizedDimensionIsRejected): (0, 2^60) doubles is refused, (0, 2^60 - 1) is
  // the largest written, and read back.
  const std::size_t over[] = {0, std::size_t{1} << 60};
  const std::vector<double> none;
  EXPECT_NE(message_of([&] { course::write_npy(dir_ / "e.npy", over, none); }).find("too large"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir_)) << "nothing may be created for a refused shape";

  EXPECT_EQ(message_of([&] {
              course::encode_npy(wrapping, course::NpyDtype::float32, two.data());
            }).rfind("encode_npy: the shape (3, 6148914691236517206) is too large", 0),
            0u);
  EXPECT_THROW(course::encode_npy(rank65, course::NpyDtype::float32, one.data()),
               std::invalid_argument);

  const std::size_t largest_empty[] = {0, (std::size_t{1} << 60) - 1};
  course::write_npy(dir_ / "ok.npy", largest_empty, none);
  EXPECT_EQ(course::read_npy(dir_ / "ok.npy").shape,
            (std::vector<std::size_t>{0, (std::size_t{1} << 60) - 1}));
}

// ---- Files that are not what they claim: bounded time and memory --------------------------------

// Issue 11: read_npy read the whole file before looking at it, so /dev/zero made it allocate
// until std::bad_alloc (~1 GB). It now reads the 10-byte preamble first, and zeros are no magic.
TEST_F(NpyTest, DevZeroIsAnNpyErrorAfterTenBytes) {
  std::string message;
  std::size_t largest = 0;
  {
    const LargestAllocation watch;
    message = read_error("/dev/zero");
    largest = watch.bytes();
  }
  EXPECT_EQ(message, "/dev/zero: not a .npy file (missing the \\x93NUMPY magic)");
  EXPECT_LT(largest, kSmall);
}

// Issue 11: a 2 GiB file whose header says two floats was read whole (2 GiB in memory, then
// rejected). Its size (fstat) cannot match the shape, so it is refused before the data is read.
// ftruncate makes the 2 GiB sparse: no disk is used.
TEST_F(NpyTest, AHugeSparseFileIsRefusedUnread) {
  const fs::path p = dir_ / "sparse.npy";
  write_bytes(
      p, handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", raw_floats({1, 2})));
  fs::resize_file(p, std::uintmax_t{1} << 31);
  std::string message;
  std::size_t largest = 0;
  {
    const LargestAllocation watch;
    message = read_error(p);
    largest = watch.bytes();
  }
  // The dict is 57 bytes, so preamble, dict and '\n' (68) pad to 128: 2^31 - 128 data bytes.
  EXPECT_EQ(message, p.string() + ": shape needs 2 elements of 4 bytes but the file holds "
                                  "2147483520 data bytes");
  EXPECT_LT(largest, kSmall);
}

// Issue 11: the header length field was trusted. Version 2.0 stores it in 4 bytes, so a file can
// claim a 4 GB header; NumPy refuses headers over 10000 bytes (max_header_size), and so does the
// reader now, from the 12-byte preamble: in memory, and from a (sparse) file that is that long.
TEST_F(NpyTest, AFourGigabyteHeaderLengthIsRefusedUnread) {
  std::string start = std::string("\x93NUMPY\x02", 7) + '\0' + "\xFF\xFF\xFF\xFF";
  start += "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
  const std::string why =
      "the header is 4294967295 bytes, more than the 10000 a .npy header may have";
  expect_npy_error(bytes_of(start), why);

  const fs::path p = dir_ / "long_header.npy";
  write_bytes(p, bytes_of(start));
  fs::resize_file(p, 12 + std::uintmax_t{0xFFFFFFFF} + 64);  // the header "fits" in the file
  std::string message;
  std::size_t largest = 0;
  {
    const LargestAllocation watch;
    message = read_error(p);
    largest = watch.bytes();
  }
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_LT(largest, kSmall);
}

// NumPy's max_header_size is a limit on the header field's length: 10000 is read, 10001 is not.
// (NumPy itself agrees on both files: NumPyReadsWhatWeWriteAndWeReadWhatNumPyWrites.)
TEST(NpyMalformed, HeadersUpTo10000BytesAreReadAndLongerOnesAreNot) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  EXPECT_EQ(course::parse_npy(with_header_len(dict, 10000, raw_floats({4}))).data,
            (std::vector<double>{4}));
  expect_npy_error(with_header_len(dict, 10001, raw_floats({4})),
                   "the header is 10001 bytes, more than the 10000 a .npy header may have");
}

// A pipe has no size to check in advance. The writer below sends a valid file of two floats and
// then 64 MiB more, as a program that never stops would: the reader must stop at the byte after
// the data, not read (and keep) everything. Its close then fails the writer's next write with
// EPIPE, and the writer ends.
TEST_F(NpyTest, APipeIsReadNoFurtherThanTheShapeNeeds) {
  const fs::path fifo = dir_ / "pipe.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const IgnoreSignal no_sigpipe(SIGPIPE);
  const auto file =
      handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", raw_floats({1, 2}));
  std::thread writer([&] {
    // Non-blocking until the reader has opened its end (ENXIO before), for at most 30 s, so
    // a reader that never opens cannot hang the test; then blocking, to be a plain pipe.
    int fd = -1;
    for (int i = 0; i < 3000 && fd < 0; ++i) {
      fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd < 0) return;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    bool open = ::write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size());
    const std::vector<char> zeros(1 << 16);
    for (int i = 0; open && i < 1024; ++i) open = ::write(fd, zeros.data(), zeros.size()) > 0;
    ::close(fd);
  });
  std::string message;
  std::size_t largest = 0;
  {
    const LargestAllocation watch;
    message = read_error(fifo);
    largest = watch.bytes();
  }
  writer.join();
  EXPECT_EQ(message, fifo.string() + ": shape needs 2 elements of 4 bytes but the file holds more "
                                     "than 8 data bytes");
  EXPECT_LT(largest, kSmall);
}

// The same size rules for a regular file as for bytes in memory, now checked against fstat
// before the data is read: one byte short, one byte over.
TEST_F(NpyTest, AFileOneByteShortOrOverIsRefused) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = raw_floats({1, 2});
  write_bytes(dir_ / "short.npy", handmade(dict, two.substr(0, 7)));
  write_bytes(dir_ / "long.npy", handmade(dict, two + "x"));
  const std::string needs = ": shape needs 2 elements of 4 bytes but the file holds ";
  EXPECT_EQ(read_error(dir_ / "short.npy"), (dir_ / "short.npy").string() + needs + "7 data bytes");
  EXPECT_EQ(read_error(dir_ / "long.npy"), (dir_ / "long.npy").string() + needs + "9 data bytes");
  write_bytes(dir_ / "ok.npy", handmade(dict, two));
  EXPECT_EQ(course::read_npy(dir_ / "ok.npy").data, (std::vector<double>{1, 2}));
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
  const auto a = course::parse_npy(
      handmade("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", payload));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.data, (std::vector<double>{-1099511627776.0}));
  EXPECT_EQ(a.to_matrix_d()(0, 0), -1099511627776.0);
}

TEST_F(NpyTest, EmptyArray) {
  const auto a = course::parse_npy(
      handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""));
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
  lying_length[9] = 0x01;  // header length 310 in a 72-byte file
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
  expect_npy_error(
      handmade("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", two),
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
                            "'shape': (4294967296, 4294967296), }",
                            ""),
                   "too large");
  expect_npy_error(handmade("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (99999999999999999999999,), }",
                            ""),
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
                                           "'shape': (1,), }",
                                           56),
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
                            "'shape': (0, 18446744073709551615), }",
                            ""),
                   "too large");
  expect_npy_error(handmade("{'descr': '<f8', 'fortran_order': True, "
                            "'shape': (4294967296, 0, 4294967296), }",
                            ""),
                   "too large");
  // 2^60 - 1 doubles are 2^63 - 8 bytes, just inside the limit; 2^60 doubles are not.
  const auto a = course::parse_npy(handmade("{'descr': '<f8', 'fortran_order': False, "
                                            "'shape': (0, 1152921504606846975), }",
                                            ""));
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.to_matrix_d().rows(), 0);
  EXPECT_EQ(a.to_matrix_d().cols(), 1152921504606846975);
  expect_npy_error(handmade("{'descr': '<f8', 'fortran_order': False, "
                            "'shape': (0, 1152921504606846976), }",
                            ""),
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
  const std::string dict1 = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  write_bytes(dir_ / "hdr_10000.npy", with_header_len(dict1, 10000, raw_floats({4})));
  write_bytes(dir_ / "hdr_10001.npy", with_header_len(dict1, 10001, raw_floats({4})));

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
# The header cap is NumPy's default max_header_size: a 10000-byte header loads, 10001 does not.
assert np.load("hdr_10000.npy").tolist() == [4.0]
try:
    np.load("hdr_10001.npy")
    raise AssertionError("NumPy loaded a 10001-byte header")
except ValueError:
    pass
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

}  // namespace test_npy
