/// @file
/// NumPy's .npy format, so learners can open any intermediate in NumPy and the tests
/// can read reference data written by PyTorch.
///
/// Format (numpy.lib.format, versions 1.0, 2.0 and 3.0):
///   "\x93NUMPY" major minor | header length (uint16 in 1.0, uint32 in 2.0/3.0, little-endian)
///   | a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
///     padded with spaces and a final '\n' so the data starts on a 64-byte boundary
///   | the raw little-endian elements, in C (row-major) or Fortran (column-major) order.
///
/// Reading accepts float32, float64, int32 and int64 ('<f4', '<f8', '<i4', '<i8'), either order,
/// and up to 64 dimensions (NumPy's own limit), and returns the elements in C order. Anything
/// else, or a file that is truncated, too long, or whose header lies about its size, is rejected
/// with NpyError naming the file and the fault (quoting at most a short, printable excerpt of
/// the header).
///
/// read_npy reads in the format's order and trusts no length before checking it, so what it
/// allocates is bounded by the array the header describes, never by what the file claims or
/// holds: the 10- or 12-byte preamble; the header, at most 10000 bytes (NumPy's default
/// max_header_size; np.load refuses longer ones too); then exactly the bytes the shape needs.
/// A regular file whose size (fstat) cannot match is refused before its data is read; a pipe
/// or a device is read no further than those bytes and the one after them, which must not
/// exist. So /dev/zero, an endless pipe or a huge sparse file is an NpyError at once.
///
/// Writing streams: the header, then the data straight from the caller's memory (no copy),
/// through course::AtomicFile (files.hpp): a temporary file beside the final name, renamed
/// into place when complete, so a failed write never leaves a half-written .npy behind. A
/// failure throws course::WriteError with the system's reason ("cannot write d/x.npy: No
/// space left on device"): it is about the disk, not about the format, so it is the error every
/// file the course writes throws, not NpyError. Before anything is created, the shape must be
/// one read_npy accepts (at most 64 dimensions, a byte count NumPy allows) and must hold
/// exactly the elements given; otherwise std::invalid_argument.
#pragma once

#include "course/files.hpp"
#include "course/types.hpp"

#include <cstddef>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace course {

/// Thrown for a malformed, unsupported or unreadable .npy file (a data problem, not a
/// programming error, hence runtime_error rather than invalid_argument).
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class NpyDtype { float32, float64, int32, int64 };

/// An array read from a .npy file: its shape and its elements in C order, widened to double
/// (exact for every supported dtype as long as integers stay below 2^53).
struct NpyArray {
  std::vector<std::size_t> shape;
  std::vector<double> data;
  NpyDtype dtype = NpyDtype::float64;
  bool fortran_order = false;  ///< how the file stored it; `data` is always C order

  std::size_t size() const { return data.size(); }

  /// The array as a float matrix. A 2-D array maps directly; a 1-D array of n elements
  /// becomes [1 x n]; a 0-D array [1 x 1]. Anything else throws std::invalid_argument.
  Matrix to_matrix() const;
  MatrixD to_matrix_d() const;

  /// Slice b of a 3-D array [B, rows, cols] as a [rows x cols] float matrix.
  Matrix slice(std::size_t b) const;

  /// A 3-D array [B, rows, cols] as a float Batch (the same element order, no transpose).
  Batch to_batch() const;
};

/// What read_npy may open: any file, or only a regular one (a link to one is followed). A
/// reader of a folder someone else may have written (a checkpoint) asks for regular files: a
/// FIFO put in a .npy's place would otherwise block it until someone writes into the FIFO.
enum class NpySource {
  any,           ///< a regular file, a pipe, a device: what the caller names
  regular_file,  ///< anything else is an NpyError before a byte is read, without waiting
};

/// The array in `path`. Throws NpyError naming the file and the fault.
NpyArray read_npy(const std::filesystem::path& path, NpySource source = NpySource::any);

/// Parses an in-memory .npy image (what read_npy does after reading the file). `what`
/// names the source in error messages. This is the fuzzing entry point.
NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& what = "<memory>");

/// Writes an N-d array of float32 or float64 in C order.
void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const float> data);
void write_npy(const std::filesystem::path& path, std::span<const std::size_t> shape,
               std::span<const double> data);

/// Writes a matrix as a 2-D float32 ('<f4') or float64 ('<f8') array in C order.
void write_npy(const std::filesystem::path& path, const Matrix& m);
void write_npy(const std::filesystem::path& path, const MatrixD& m);

/// Writes a column-major float matrix as-is with fortran_order True (no copy, no transpose):
/// the same array NumPy would see from the row-major overload.
void write_npy_fortran(const std::filesystem::path& path, const Eigen::MatrixXf& m);

/// The bytes write_npy would put in the file, in memory (tests and the fuzz target use it). The
/// header comes from the same code as write_npy's, so the two cannot disagree. `data` holds the
/// shape's elements of `dtype`, in C order, or in Fortran order when fortran_order. Throws
/// std::invalid_argument for a shape write_npy refuses, or a null `data` with elements to copy.
std::vector<unsigned char> encode_npy(std::span<const std::size_t> shape, NpyDtype dtype,
                                      const void* data, bool fortran_order = false);

}  // namespace course
