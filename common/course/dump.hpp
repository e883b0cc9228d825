/// @file
/// --dump DIR: the chapter's intermediates as .npy files, and a manifest that says what they are.
///
///     >>> import json, numpy as np
///     >>> manifest = json.load(open("dump/manifest.json"))
///     >>> W = np.load("dump/W_ax.npy")
///
/// A dump folder holds one complete run, and says so:
///   - manifest.json is written last, after every array: the chapter, its seed, every option
///     (given or default), and for each array its file, shape, dtype and, for a model
///     parameter, its PyTorch state_dict key. A folder without it is not a finished dump: the
///     replay scripts (scripts/check_*_dump.py) read the manifest and refuse such a folder.
///   - Until the run finishes, the folder keeps what it held: the arrays are written into a
///     hidden folder inside it, ".writing-<pid>", and only finish() moves them into place, with
///     the manifest last. A run that fails or is interrupted (Ctrl-C, kill) removes that folder
///     and leaves the earlier dump as it was; so does a save that finds the disk full half-way.
///   - finish() replaces the earlier run's files (those its manifest.json lists) with the new
///     ones, so no stale array from other knobs stays next to the new ones. It holds Ctrl-C
///     back while it does (renames only, milliseconds); only a `kill -9` or a power cut in those
///     milliseconds can leave INCOMPLETE.txt, listing the files of both runs, which the next run
///     removes. A .npy file that no earlier run of the course lists is never removed:
///     check_dump_folder() refuses such a folder before the chapter starts.
///   - One writer at a time: from the first array to finish() the Dumper holds the folder's
///     FolderLock (folder_lock.hpp) for writing, and a chapter holds it from the moment its
///     command line is accepted. A second run writing the same folder is refused; two runs can
///     never mix their arrays in one folder.
///   - Past 256 MiB a note on stderr says the dump is getting large.
#pragma once

#include "course/folder_lock.hpp"
#include "course/interrupt.hpp"
#include "course/types.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

// attn/layers/transformer.hpp and attn/layers/parameters.hpp, declared only, so every chapter need
// not include them.
namespace attn {
template <Real T>
struct EncoderLayerOf;
template <Real T>
struct DecoderLayerOf;
using EncoderLayer = EncoderLayerOf<float>;
using DecoderLayer = DecoderLayerOf<float>;
template <typename T>
struct Parameter;
}  // namespace attn

namespace course {

/// The two names of a dump folder's bookkeeping, shared by dumps and checkpoints (a checkpoint
/// is a dump folder): the manifest, written last, the journal of a run stopped while it moved
/// its files into place, and the prefix of the hidden folder a run writes its arrays into.
inline constexpr const char* kDumpManifest = "manifest.json";
inline constexpr const char* kDumpJournal = "INCOMPLETE.txt";
inline constexpr const char* kDumpStagingPrefix = ".writing-";

/// What a dump's manifest records about the run that wrote it.
struct DumpSource {
  std::string chapter{};  ///< "08_transformer_block"
  std::uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> options{};  ///< {"--layers", "2"}, ...
  /// Past this many bytes of arrays a note on stderr says the dump is getting large.
  std::uint64_t note_above_bytes = 256ull << 20;
};

/// The problem with using `dir` as a dump folder, or "" when it may be used: it must not hold
/// .npy files that no earlier dump of the course lists (they would be mistaken for this run's),
/// and a manifest.json or INCOMPLETE.txt in it must be the course's own.
std::string check_dump_folder(const std::filesystem::path& dir);

class Dumper {
 public:
  /// An empty `dir` disables the dumper: every call below then does nothing.
  explicit Dumper(std::filesystem::path dir = {}, DumpSource source = {});

  bool enabled() const { return !dir_.empty(); }

  /// Writes `DIR/NAME.npy` (float32, C order) and records it for the manifest.
  void operator()(const std::string& name, const Matrix& m);
  /// The same in float64.
  void operator()(const std::string& name, const MatrixD& m);
  /// A vector as the 1-D array [n], as PyTorch holds a bias.
  void operator()(const std::string& name, const RowVector& v);
  /// A batch as the 3-D array [B, rows, cols] (float32), as PyTorch would save the tensor.
  void operator()(const std::string& name, const Batch& x);
  /// A batch of masks as float32 [B, n_q, n_k]: 1 = may attend, 0 = blocked.
  void operator()(const std::string& name, const BatchOf<bool>& allowed);
  /// An N-d array, e.g. [B, n, d] written from B row-major [n x d] slices laid end to end.
  void operator()(const std::string& name, std::span<const std::size_t> shape,
                  std::span<const float> data);

  /// A model parameter: written as the file named by its state_dict key with '.' as '_'
  /// ("encoder.layers.0.norm1.weight" -> encoder_layers_0_norm1_weight.npy), and the key
  /// recorded in the manifest, so a script rebuilds the state_dict from the manifest alone.
  void parameter(const std::string& state_dict_key, const Matrix& weight);
  void parameter(const std::string& state_dict_key, const RowVector& vector);
  /// The same for a tensor of any shape from its elements in C order (float32): how
  /// dump_parameters writes a tensor stacked from blocks, such as in_proj_weight [3E x E].
  void parameter(const std::string& state_dict_key, std::span<const std::size_t> shape,
                 std::span<const float> data);

  /// A field of the manifest beside "chapter", "seed" and "options": `json` is the text of a
  /// JSON value (nlohmann::json::dump()), such as a checkpoint's training state. Throws
  /// std::invalid_argument for a name the manifest uses already or text that is not JSON.
  void record(const std::string& field, const std::string& json);

  /// Ends the dump: writes manifest.json, then moves the arrays and the manifest into place,
  /// replacing the earlier run's. Called by course::Chapter::run after the lesson.
  void finish();
  /// Removes every file this run wrote (a failed run leaves no partial dump); the folder keeps
  /// the earlier dump it held.
  void abandon() noexcept;

  /// "wrote 12 arrays to dump/: W_ax, W_aa, ..." (empty when disabled or nothing written).
  std::string summary() const;

 private:
  struct Entry {
    std::string name, dtype, state_dict_key;
    std::vector<std::size_t> shape;
  };
  void begin();
  /// Writes the array with `write` into the staging folder and records it for the manifest.
  void store(Entry entry, std::size_t bytes,
             const std::function<void(const std::filesystem::path&)>& write);
  /// Moves the staged files into the folder, replacing the earlier run's; manifest last.
  void publish();

  std::filesystem::path dir_;
  DumpSource source_;
  std::vector<Entry> written_;
  std::vector<std::pair<std::string, std::string>> fields_;  ///< record(): name, JSON text
  bool begun_ = false;
  std::uint64_t bytes_ = 0;
  FolderLock lock_;                ///< held from begin() to finish() or abandon()
  std::filesystem::path staging_;  ///< dir/.writing-<pid>: this run's arrays until finish()
  std::set<std::string> earlier_;  ///< the files of the run this one replaces
  std::unique_ptr<interrupt::RemoveFolderOnSignal> staging_on_signal_;
};

/// One state_dict tensor as a list of attn::Parameter views makes it: its key, its PyTorch shape
/// ([rows x cols] for a matrix, [n] for a vector) and the views that hold it, in order.
struct StateDictTensor {
  std::string key;                  ///< "encoder.layers.0.self_attn.in_proj_weight"
  std::vector<std::size_t> shape;   ///< {3E, E}; a vector (a bias, a LayerNorm weight) is {n}
  std::vector<std::size_t> blocks;  ///< indices into the list: one, or three for in_proj_*
};

/// The state_dict a parameter list stands for (attn::parameters(model), parameters.hpp): each
/// key once, in the order of its first block, the blocks of a key stacked back into PyTorch's
/// tensor (nn.MultiheadAttention's W_Q, W_K, W_V rows -> in_proj_weight [3E x E], their biases
/// -> in_proj_bias [3E]). Throws std::invalid_argument when the blocks of a key do not tile it
/// (a block's `first` is not where the previous one ended, the column counts differ, or a
/// vector block meets a matrix block): a list made by attn::parameters always tiles.
template <typename T>
std::vector<StateDictTensor> state_dict_layout(const std::vector<attn::Parameter<T>>& params);

/// Every parameter of a list, each state_dict key once, as PyTorch's state_dict holds it (the
/// blocks of a key stacked, vectors 1-D), written with Dumper::parameter: the file is the key
/// with '.' as '_', the key is in the manifest, and the order is the list's (named_parameters
/// order for attn::parameters). The one way the course writes a model's parameters:
///
///     course::dump_parameters(ch.dumper(), attn::parameters(std::as_const(model)));
///
/// Nothing when the dumper is disabled.
void dump_parameters(Dumper& dump, const std::vector<attn::Parameter<const float>>& params);

/// One layer's parameters under PyTorch's state_dict keys. `prefix` "encoder.layers.0." gives
/// the keys encoder.layers.0.self_attn.in_proj_weight [3E x E], ...self_attn.in_proj_bias [3E],
/// ...self_attn.out_proj.weight [E x E], ...self_attn.out_proj.bias [E], then linear1.weight
/// [d_ff x E], linear1.bias [d_ff], linear2.weight [E x d_ff], linear2.bias [E], norm1.weight,
/// norm1.bias, norm2.weight, norm2.bias [E] each, in that order (the files: the keys with '.'
/// as '_'). Nothing when the dumper is disabled. The same as
/// dump_parameters(dump, attn::parameters(layer, prefix)).
void dump_parameters(Dumper& dump, const std::string& prefix, const attn::EncoderLayer& layer);
/// The same for a decoder layer: self_attn.*, then multihead_attn.* (the cross-attention),
/// linear1/linear2, and norm1 to norm3.
void dump_parameters(Dumper& dump, const std::string& prefix, const attn::DecoderLayer& layer);

}  // namespace course
