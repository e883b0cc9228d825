/// @file
/// --save DIR and --load DIR: a trained model's parameters as .npy files named by their PyTorch
/// state_dict keys, with a manifest, read back all or nothing.
///
///     course::save_checkpoint(dir, source, model, [&](course::Dumper& d) {
///       d("eval_src", src);                          // extra arrays: written before the manifest
///     });
///     course::load_checkpoint(dir, "09_training", model);  // CheckpointError: print it, exit 2
///
///     >>> import json, numpy as np, torch
///     >>> m = json.load(open("ckpt/manifest.json"))
///     >>> sd = {a["state_dict_key"]: torch.from_numpy(np.load("ckpt/" + a["file"]))
///     ...       for a in m["arrays"] if "state_dict_key" in a}
///     >>> model.load_state_dict(sd)                  # scripts/check_training_checkpoint.py
///
/// A checkpoint folder is a dump folder (dump.hpp) written by a course::Dumper, so it follows the
/// dump's rules: the arrays first, each through an AtomicFile (never half-written), listed in the
/// journal INCOMPLETE.txt while the run writes, and manifest.json last, recording the chapter,
/// the seed, the options and, for each array, its file, shape, dtype and state_dict key. A
/// failed write throws course::WriteError and the run's files are removed. Saving into a folder
/// that holds an earlier dump or checkpoint of the course replaces it (its files go as the new
/// one begins); a folder with .npy files that no manifest of the course lists is refused
/// (check_dump_folder: a chapter checks --save's folder with it before it trains, so that the
/// refusal is exit 2 before anything runs).
///
/// Every state_dict key is written once, as PyTorch holds it: the three blocks attn::parameters
/// gives nn.MultiheadAttention's in_proj_weight (W_Q, W_K, W_V) stacked into [3E x E], their
/// biases into in_proj_bias [3E], vectors 1-D ([n]), every array float32, the file the key
/// with '.' as '_' (encoder.layers.0.norm1.weight -> encoder_layers_0_norm1_weight.npy). A tied
/// weight is one key (a tied Seq2Seq has no generator.weight): what named_parameters() lists.
///
/// load_checkpoint reads the manifest and every tensor the model needs, and checks all of it
/// before it writes a single number into the model; whatever it refuses, the model keeps the
/// values it had. It refuses, with a CheckpointError naming the file or key and the problem:
///   - a missing folder, or one without manifest.json;
///   - an unfinished checkpoint (INCOMPLETE.txt present: the run that saved it was stopped);
///   - a manifest that is not the course's, or was written by another chapter;
///   - a key the model needs that the checkpoint lacks, or a key the checkpoint has that the
///     model lacks (saved with other options: --norm, --tied, --layers);
///   - a shape that differs: "encoder.layers.0.linear1.weight is [64 x 32] in the checkpoint but
///     [32 x 16] in this model";
///   - a file that is missing, truncated or malformed (course::NpyError, rethrown naming the
///     file), not float32, or whose shape differs from the manifest's;
///   - a NaN or an infinity (a diverged run saved its last state).
/// Arrays without a state_dict key (evaluation inputs and outputs saved beside the weights) are
/// ignored by the load. Every file is opened only if it is a regular file (a FIFO in a .npy's
/// place is refused at once, not waited on), and the folder is locked for reading while it is
/// read (folder_lock.hpp): a checkpoint that another run is writing is refused, never read
/// half old, half new.
///
/// ## Resuming training exactly
///
/// A checkpoint may carry the training run's state beside the weights (TrainingState): Adam's
/// two moments per parameter and its step count, the schedule's position and length, and the
/// random stream the batches are drawn from. PyTorch saves optimizer.state_dict() and the
/// scheduler's beside model.state_dict() for the same purpose. The moments are stacked per
/// state_dict key like the weights, in files "optimizer_exp_avg_<key>.npy" and
/// "optimizer_exp_avg_sq_<key>.npy" ('.' as '_'), listed without a state_dict key; the numbers
/// are in manifest.json's "training" object:
///
///     "training": {"step": 400, "steps": 800, "adam_step": 400,
///                  "batches_rng": {"words": ["0x1f3a...", ...4], "spare": null},
///                  "exp_avg": {"<key>": "<file>", ...}, "exp_avg_sq": {...}}
///
/// A run that trains 2N steps, and a run that trains N, saves, loads and trains N more with
/// the same knobs, end with the same weights, bit for bit (tests/chapters/test_09_training.cpp).
#pragma once

#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/training/optim.hpp"
#include "course/dump.hpp"

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace course {

/// A checkpoint cannot be loaded. what(): "<file or folder>: <the problem>", ready to print
/// as the chapter's usage error (exit 2).
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Arrays a chapter writes into the checkpoint folder beside the weights (evaluation inputs, the
/// model's outputs on them), through the same Dumper: called after the parameters and before
/// the manifest, so they are listed in it (without a state_dict key) and share its rules.
using CheckpointExtras = std::function<void(Dumper&)>;

/// Where a training run stands between two steps: what a checkpoint needs, beside the weights,
/// for the run to go on as if it had not stopped.
struct TrainingState {
  std::int64_t step = 0;   ///< optimiser steps taken: the schedule's position
  std::int64_t steps = 0;  ///< the schedule's length (the run's --steps)
  /// Adam's moments and step count (attn::Adam::state()), one entry per parameter block.
  std::vector<attn::AdamStateOf<float>> adam;
  attn::Rng::State batches{};  ///< the stream the training batches are drawn from
};

/// Writes the parameters of `params` (attn::parameters of a const model) into `dir` as a
/// checkpoint of `source.chapter`: each state_dict key once, stacked as PyTorch holds it, then
/// `extras`, then manifest.json recording `source` (chapter, seed, options). Creates `dir` if
/// needed. Throws course::WriteError when a file cannot be written or `dir` holds .npy files
/// that no manifest of the course lists; whatever fails (a WriteError, or an exception out of
/// `extras`, rethrown), the files this call wrote are removed and no manifest is left.
void save_checkpoint(const std::filesystem::path& dir, const DumpSource& source,
                     const std::vector<attn::Parameter<const float>>& params,
                     const CheckpointExtras& extras = {});
/// The same, with the training run's state (Resuming training, above): its entries must be
/// the blocks of `params`, in order (what attn::Adam::state() holds after a step on them), or
/// std::invalid_argument.
void save_checkpoint(const std::filesystem::path& dir, const DumpSource& source,
                     const std::vector<attn::Parameter<const float>>& params,
                     const TrainingState& training, const CheckpointExtras& extras = {});

/// Reads the checkpoint of `chapter` in `dir` into the tensors `params` views
/// (attn::parameters(model)), all or nothing: every key, shape and value is read and checked
/// first (the list in the file comment), and only then copied into the model. Throws
/// CheckpointError for every refusal; the model is untouched then. Returns the training state
/// saved with the weights, checked as thoroughly (every moment present, float32, finite, of
/// its parameter's shape; the second moments >= 0; the step counts agreeing; a stream state
/// xoshiro can be in), or std::nullopt for a checkpoint saved without one.
std::optional<TrainingState> load_checkpoint(const std::filesystem::path& dir,
                                             const std::string& chapter,
                                             const std::vector<attn::Parameter<float>>& params);

/// The options manifest.json records ({"--d-model": "32", "--seed": "2026", ...}), for a
/// chapter that rebuilds the model's sizes from a checkpoint before it loads it. Refuses (with
/// CheckpointError) what load_checkpoint refuses before it looks at the arrays: a missing
/// folder or manifest, an unfinished checkpoint, another chapter's or a malformed manifest.
std::map<std::string, std::string> checkpoint_options(const std::filesystem::path& dir,
                                                      const std::string& chapter);

/// What stops a run that resumes from `saved` (the checkpoint `what` names, "--load: run")
/// on a schedule of `steps` and stops after step `stop_at` (0: at the schedule's end), or "":
/// a --stop-at past the schedule's end, or a checkpoint that has trained as far already
/// (`advice` then says what to give instead). Chapters 09 and 12 ask it before anything runs.
std::string resume_problem(const std::string& what, const TrainingState& saved, std::int64_t steps,
                           std::int64_t stop_at, const std::string& advice);

/// A float model with a parameter walk: attn::Seq2Seq, attn::AttentionOnly, a layer.
template <typename M>
concept CheckpointModel = requires {
  typename std::remove_const_t<M>::Scalar;
}
&&std::same_as<typename std::remove_const_t<M>::Scalar, float>;

/// save_checkpoint(dir, source, attn::parameters(model), extras).
template <CheckpointModel M>
void save_checkpoint(const std::filesystem::path& dir, const DumpSource& source, const M& model,
                     const CheckpointExtras& extras = {}) {
  save_checkpoint(dir, source, attn::parameters(model), extras);
}

/// load_checkpoint(dir, chapter, attn::parameters(model)).
/// save_checkpoint(dir, source, attn::parameters(model), training, extras).
template <CheckpointModel M>
void save_checkpoint(const std::filesystem::path& dir, const DumpSource& source, const M& model,
                     const TrainingState& training, const CheckpointExtras& extras = {}) {
  save_checkpoint(dir, source, attn::parameters(model), training, extras);
}

/// load_checkpoint(dir, chapter, attn::parameters(model)).
template <CheckpointModel M>
requires(!std::is_const_v<M>) std::optional<TrainingState> load_checkpoint(
    const std::filesystem::path& dir, const std::string& chapter, M& model) {
  return load_checkpoint(dir, chapter, attn::parameters(model));
}

}  // namespace course
