// course::save_checkpoint and course::load_checkpoint (common/course/checkpoint.hpp): a model's
// state_dict as .npy files and a manifest, read back bit for bit; in_proj_weight stacked as
// nn.MultiheadAttention holds it; every refusal of a load naming the file or key and the problem,
// with the model left as it was; and scripts/check_training_checkpoint.py replaying a checkpoint
// in PyTorch (skipped where /usr/bin/python3 has no torch; CI has it).
#include "attn/core/random.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/attention_only.hpp"
#include "attn/models/seq2seq.hpp"
#include "course/checkpoint.hpp"
#include "course/dump.hpp"
#include "course/files.hpp"
#include "course/folder_lock.hpp"
#include "course/npy.hpp"

#include "chapter_run.hpp"
#include "child_process.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace test_checkpoint {

using attn::Index;
using attn::Matrix;
using attn::NormPlacement;
using attn::Seq2Seq;
using attn::Seq2SeqConfig;
using attn_test::contains;
using attn_test::identical;
using attn_test::listing;

constexpr const char* kChapter = "09_training";

Seq2SeqConfig config(NormPlacement norm, bool tied, Index d_ff = 16) {
  return {.vocab = 7,
          .d_model = 8,
          .heads = 2,
          .d_ff = d_ff,
          .layers = 1,
          .norm = norm,
          .tied = tied,
          .pad_id = 0,
          .max_len = 8};
}

// A model whose every entry is its own N(0, 1) draw: no zero bias, no LayerNorm at 1, so a
// swapped, lost or misplaced tensor shows.
Seq2Seq model(std::uint64_t seed, const Seq2SeqConfig& c) {
  attn::Rng rng(seed);
  Seq2Seq m = attn::seq2seq_init(rng, c);
  for (attn::Parameter<float>& p : attn::parameters(m)) {
    p.value = attn::random_normal(rng, p.value.rows(), p.value.cols());
  }
  return m;
}

course::DumpSource source(const Seq2SeqConfig& c, const std::string& chapter = kChapter,
                          const std::string& task = "reversal") {
  return {.chapter = chapter,
          .seed = 9,
          .options = {{"--seed", "9"},
                      {"--task", task},
                      {"--vocab", std::to_string(c.vocab)},
                      {"--d-model", std::to_string(c.d_model)},
                      {"--heads", std::to_string(c.heads)},
                      {"--d-ff", std::to_string(c.d_ff)},
                      {"--layers", std::to_string(c.layers)},
                      {"--norm", c.norm == NormPlacement::pre ? "pre" : "post"},
                      {"--tied", c.tied ? "true" : "false"},
                      {"--max-len", std::to_string(c.max_len)}}};
}

// Every parameter block of a model, copied: what "untouched" is compared with.
template <typename M>
std::vector<Matrix> snapshot(const M& m) {
  std::vector<Matrix> values;
  for (const auto& p : attn::parameters(m)) values.emplace_back(p.value);
  return values;
}

template <typename M>
bool same_parameters(const M& a, const M& b) {
  const std::vector<Matrix> x = snapshot(a), y = snapshot(b);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!identical(x[i], y[i])) return false;
  }
  return true;
}

nlohmann::json manifest_of(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json");
  return nlohmann::json::parse(in);
}

std::string file_of(std::string key) {
  std::replace(key.begin(), key.end(), '.', '_');
  return key + ".npy";
}

// ---- Saving and loading -------------------------------------------------------------------------

void expect_round_trip(const Seq2SeqConfig& c, const std::string& name) {
  const fs::path dir = attn_test::scratch("checkpoint", name);
  const Seq2Seq saved = model(1, c);
  course::save_checkpoint(dir, source(c), saved);

  // The manifest lists each named_parameters() key once, in that order, in PyTorch's shapes.
  std::vector<std::string> keys;
  for (const auto& p : attn::parameters(saved)) {
    if (keys.empty() || keys.back() != p.key) keys.push_back(p.key);
  }
  const nlohmann::json m = manifest_of(dir);
  ASSERT_EQ(m["arrays"].size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(m["arrays"][i]["state_dict_key"], keys[i]);
    EXPECT_EQ(m["arrays"][i]["file"], file_of(keys[i]));
    EXPECT_EQ(m["arrays"][i]["dtype"], "float32");
  }
  EXPECT_EQ(listing(dir).size(), keys.size() + 1) << "the arrays and manifest.json, nothing else";
  EXPECT_EQ(c.tied, !fs::exists(dir / "generator_weight.npy")) << "a tied weight is one key";
  EXPECT_EQ(c.norm == NormPlacement::pre, fs::exists(dir / "encoder_norm_weight.npy"));

  Seq2Seq loaded = model(2, c);  // other values, same shapes
  ASSERT_FALSE(same_parameters(saved, loaded));
  const Matrix positions = loaded.positions;
  course::load_checkpoint(dir, kChapter, loaded);
  EXPECT_TRUE(same_parameters(saved, loaded)) << "every parameter back, bit for bit";
  EXPECT_TRUE(identical(loaded.positions, positions)) << "a buffer, not a parameter";
  fs::remove_all(dir);
}

TEST(Checkpoint, RoundTripIsBitExactPostNormUntied) {
  expect_round_trip(config(NormPlacement::post, false), "round_trip_post");
}

TEST(Checkpoint, RoundTripIsBitExactPreNormTied) {
  expect_round_trip(config(NormPlacement::pre, true), "round_trip_pre_tied");
}

TEST(Checkpoint, InProjWeightHoldsTheThreeProjectionsStacked) {
  const fs::path dir = attn_test::scratch("checkpoint", "in_proj");
  const Seq2Seq m = model(3, config(NormPlacement::post, false));
  course::save_checkpoint(dir, source(config(NormPlacement::post, false)), m);
  for (const auto& [key, mha] :
       {std::pair{std::string("encoder.layers.0.self_attn."), &m.encoder[0].self_attn},
        std::pair{std::string("decoder.layers.0.self_attn."), &m.decoder[0].self_attn},
        std::pair{std::string("decoder.layers.0.multihead_attn."), &m.decoder[0].multihead_attn}}) {
    const course::NpyArray w = course::read_npy(dir / file_of(key + "in_proj_weight"));
    EXPECT_EQ(w.shape, (std::vector<std::size_t>{24, 8})) << key << ": [3E x E]";
    const Matrix W = w.to_matrix();
    EXPECT_TRUE(identical(W, attn::in_proj_weight(*mha))) << key;
    EXPECT_TRUE(identical(W.middleRows(0, 8), mha->q_proj.weight)) << key << ": W_Q first";
    EXPECT_TRUE(identical(W.middleRows(8, 8), mha->k_proj.weight)) << key << ": then W_K";
    EXPECT_TRUE(identical(W.middleRows(16, 8), mha->v_proj.weight)) << key << ": then W_V";
    const course::NpyArray b = course::read_npy(dir / file_of(key + "in_proj_bias"));
    EXPECT_EQ(b.shape, std::vector<std::size_t>{24}) << key << ": a vector is 1-D";
    EXPECT_TRUE(identical(b.to_matrix(), attn::in_proj_bias(*mha))) << key;
  }
  EXPECT_EQ(course::read_npy(dir / "generator_bias.npy").shape, std::vector<std::size_t>{7});
  EXPECT_EQ(course::read_npy(dir / "encoder_layers_0_norm1_weight.npy").shape,
            std::vector<std::size_t>{8});
  fs::remove_all(dir);
}

TEST(Checkpoint, TheManifestRecordsTheRunAndExtraArraysGoBesideTheWeights) {
  const fs::path dir = attn_test::scratch("checkpoint", "manifest");
  const Seq2SeqConfig c = config(NormPlacement::pre, true);
  const Seq2Seq m = model(4, c);
  const Matrix eval_src = Matrix::Constant(2, 3, 5.0f);  // [2 x 3]
  course::save_checkpoint(dir, source(c), m, [&](course::Dumper& d) { d("eval_src", eval_src); });
  const nlohmann::json j = manifest_of(dir);
  EXPECT_EQ(j["chapter"], kChapter);
  EXPECT_EQ(j["seed"], 9);
  EXPECT_EQ(j["arrays"].back()["name"], "eval_src");
  EXPECT_FALSE(j["arrays"].back().contains("state_dict_key")) << "not a weight";
  EXPECT_TRUE(identical(course::read_npy(dir / "eval_src.npy").to_matrix(), eval_src));

  const std::map<std::string, std::string> options = course::checkpoint_options(dir, kChapter);
  EXPECT_EQ(options.size(), 10u);
  EXPECT_EQ(options.at("--d-model"), "8");
  EXPECT_EQ(options.at("--norm"), "pre");
  EXPECT_EQ(options.at("--tied"), "true");

  Seq2Seq loaded = model(5, c);
  course::load_checkpoint(dir, kChapter, loaded);  // eval_src is no concern of the load
  EXPECT_TRUE(same_parameters(m, loaded));
  fs::remove_all(dir);
}

TEST(Checkpoint, SavingAgainReplacesTheEarlierCheckpoint) {
  const fs::path dir = attn_test::scratch("checkpoint", "again");
  const Seq2SeqConfig pre = config(NormPlacement::pre, true),
                      post = config(NormPlacement::post, false);
  course::save_checkpoint(dir, source(pre), model(6, pre));
  const Seq2Seq second = model(7, post);
  course::save_checkpoint(dir, source(post), second);
  EXPECT_FALSE(fs::exists(dir / "encoder_norm_weight.npy")) << "the first one's arrays are gone";
  Seq2Seq loaded = model(8, post);
  course::load_checkpoint(dir, kChapter, loaded);
  EXPECT_TRUE(same_parameters(second, loaded));
  fs::remove_all(dir);
}

TEST(Checkpoint, AFailedSaveLeavesNoArrayAndNoManifest) {
  const fs::path dir = attn_test::scratch("checkpoint", "failed_save");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  EXPECT_THROW(course::save_checkpoint(dir, source(c), model(9, c),
                                       [](course::Dumper&) { throw std::runtime_error("eval"); }),
               std::runtime_error);
  EXPECT_TRUE(listing(dir).empty()) << "every array removed, no journal, no manifest";
  fs::remove_all(dir);
}

TEST(Checkpoint, AFailedSaveKeepsTheEarlierCheckpoint) {
  const fs::path dir = attn_test::scratch("checkpoint", "failed_save_keeps");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  const Seq2Seq good = model(30, c);
  course::save_checkpoint(dir, source(c), good);
  const std::vector<std::string> files = listing(dir);
  // 1. Something fails after half the arrays are written.
  EXPECT_THROW(course::save_checkpoint(dir, source(c), model(31, c),
                                       [](course::Dumper&) { throw std::runtime_error("eval"); }),
               std::runtime_error);
  EXPECT_EQ(listing(dir), files);
  Seq2Seq loaded = model(32, c);
  course::load_checkpoint(dir, kChapter, loaded);
  EXPECT_TRUE(same_parameters(good, loaded));
  // 2. The disk fills half-way (a 4 KiB file size limit: linear1.weight [256 x 8] does not fit).
  const Seq2SeqConfig big = config(NormPlacement::post, false, 256);
  const int code = attn_test::in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      course::save_checkpoint(dir, source(big), model(33, big));
    } catch (const course::WriteError& e) {
      return contains(e.what(), "File too large") ? 0 : 2;
    }
    return 1;
  });
  ASSERT_EQ(code, 0) << "1: the save went through; 2: another error";
  EXPECT_EQ(listing(dir), files) << "nothing of the failed save, nothing of the good one lost";
  Seq2Seq again = model(34, c);
  course::load_checkpoint(dir, kChapter, again);
  EXPECT_TRUE(same_parameters(good, again));
  fs::remove_all(dir);
}

TEST(Checkpoint, SavingRefusesAFolderWithForeignArraysOrAFile) {
  const fs::path dir = attn_test::scratch("checkpoint", "save_refused");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  std::ofstream(dir / "mine.npy") << "a learner's array";
  try {
    course::save_checkpoint(dir, source(c), model(10, c));
    ADD_FAILURE() << "no WriteError";
  } catch (const course::WriteError& e) {
    EXPECT_TRUE(contains(e.what(), "mine.npy")) << e.what();
  }
  EXPECT_EQ(listing(dir), std::vector<std::string>{"mine.npy"});
  std::ofstream(dir / "file") << "x";
  try {
    course::save_checkpoint(dir / "file", source(c), model(10, c));
    ADD_FAILURE() << "no WriteError";
  } catch (const course::WriteError& e) {
    EXPECT_TRUE(contains(e.what(), (dir / "file").string() + ": not a folder")) << e.what();
  }
  fs::remove_all(dir);
}

// ---- Refusals: each names the file or key and the problem, and leaves the model as it was -------

// What load_checkpoint says (CheckpointError) loading `dir` into `into`, after checking that
// the model kept every value.
template <typename M>
std::string refusal(const fs::path& dir, M& into, const std::string& chapter = kChapter) {
  const std::vector<Matrix> before = snapshot(into);
  std::string what = "(no error)";
  try {
    course::load_checkpoint(dir, chapter, into);
  } catch (const course::CheckpointError& e) {
    what = e.what();
  }
  const std::vector<Matrix> after = snapshot(into);
  bool untouched = before.size() == after.size();
  for (std::size_t i = 0; untouched && i < before.size(); ++i)
    untouched = identical(before[i], after[i]);
  EXPECT_TRUE(untouched) << "a refused load changed the model: " << what;
  return what;
}

// A saved post-norm untied checkpoint in a fresh folder, and a model of its shapes to load into.
struct Saved {
  fs::path dir;
  Seq2Seq into;
  explicit Saved(const std::string& name, Seq2SeqConfig c = config(NormPlacement::post, false))
      : dir(attn_test::scratch("checkpoint", name)), into(model(12, c)) {
    course::save_checkpoint(dir, source(c), model(11, c));
  }
  ~Saved() { fs::remove_all(dir); }
  Saved(const Saved&) = delete;
  Saved& operator=(const Saved&) = delete;
};

TEST(CheckpointRefusal, AMissingFolder) {
  Saved s("missing_folder");
  const std::string what = refusal(s.dir / "nowhere", s.into);
  EXPECT_EQ(what, (s.dir / "nowhere").string() + ": no such folder: no checkpoint was saved there");
}

TEST(CheckpointRefusal, AFolderWithoutManifest) {
  Saved s("no_manifest");
  fs::remove(s.dir / "manifest.json");
  const std::string what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(what, (s.dir / "manifest.json").string() + ": missing")) << what;
  EXPECT_TRUE(contains(what, "not a checkpoint of the course")) << what;
}

TEST(CheckpointRefusal, AnUnfinishedCheckpoint) {
  // Only a run killed (-9) while it moved a finished save into place leaves the journal, beside
  // a manifest or without one.
  Saved s("unfinished");
  std::ofstream(s.dir / "INCOMPLETE.txt") << "# killed\n";
  std::string what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(what, (s.dir / "INCOMPLETE.txt").string() + ": ")) << what;
  EXPECT_TRUE(contains(what, "did not finish")) << what;
  fs::remove(s.dir / "manifest.json");
  EXPECT_TRUE(contains(refusal(s.dir, s.into), "did not finish"));
}

TEST(CheckpointRefusal, ACheckpointAnotherRunIsWriting) {
  Saved s("being_written");
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t writer = ::fork();
  if (writer == 0) {  // another run, saving into the folder: it holds it until told to stop
    const course::FolderLock lock(s.dir, course::FolderLock::Mode::write);
    char c = 'x';
    (void)::write(ready[1], &c, 1);
    (void)::read(done[0], &c, 1);
    std::_Exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(refusal(s.dir, s.into),
            s.dir.string() + " is being written by another run of the course: wait for it to end");
  (void)::write(done[1], &c, 1);
  ::waitpid(writer, nullptr, 0);
  EXPECT_NO_THROW(course::load_checkpoint(s.dir, kChapter, s.into)) << "once it is done, it loads";
  for (const int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST(CheckpointRefusal, AFifoInPlaceOfAFileIsRefusedNotWaitedOn) {
  for (const std::string file : {"generator_bias.npy", "manifest.json"}) {
    Saved s("fifo");
    fs::remove(s.dir / file);
    ASSERT_EQ(::mkfifo((s.dir / file).c_str(), 0600), 0);
    const int code = attn_test::in_child_within(10, [&] {
      return contains(refusal(s.dir, s.into),
                      (s.dir / file).string() + ": not a regular file (a FIFO)")
                 ? 0
                 : 1;
    });
    EXPECT_EQ(code, 0) << file << ": -1 means it waited for a writer, 1 another message";
  }
}

TEST(CheckpointRefusal, AnotherChaptersManifest) {
  const fs::path dir = attn_test::scratch("checkpoint", "other_chapter");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  course::save_checkpoint(dir, source(c, "08_transformer_block"), model(14, c));
  Seq2Seq into = model(15, c);
  EXPECT_EQ(refusal(dir, into), (dir / "manifest.json").string() +
                                    ": a checkpoint of 08_transformer_block, not of 09_training");
  try {
    (void)course::checkpoint_options(dir, kChapter);
    ADD_FAILURE() << "checkpoint_options read another chapter's options";
  } catch (const course::CheckpointError& e) {
    EXPECT_TRUE(contains(e.what(), "not of 09_training")) << e.what();
  }
  fs::remove_all(dir);
}

TEST(CheckpointRefusal, AMalformedManifest) {
  Saved s("bad_manifest");
  std::ofstream(s.dir / "manifest.json") << "{ not json";
  std::string what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(what, (s.dir / "manifest.json").string() + ": not a checkpoint manifest"))
      << what;
  EXPECT_TRUE(contains(what, "not valid JSON")) << what;
  std::ofstream(s.dir / "manifest.json")
      << R"({"chapter": "09_training", "options": {}, "arrays": [)"
      << R"({"file": "../x.npy", "shape": [7], "dtype": "float32", "state_dict_key": "a"},)"
      << R"({"file": "a.npy", "shape": [7], "dtype": "float32", "state_dict_key": "a"}]})";
  what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(what, "a is listed twice")) << what;
}

TEST(CheckpointRefusal, AFileNameOutsideTheFolder) {
  const fs::path dir = attn_test::scratch("checkpoint", "outside");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  Seq2Seq into = model(16, c);
  // A manifest naming every key the model needs, one of them by a path out of the folder.
  nlohmann::json arrays = nlohmann::json::array();
  for (const course::StateDictTensor& t : course::state_dict_layout(attn::parameters(into))) {
    const std::string file = t.key == "generator.bias" ? "../generator_bias.npy" : file_of(t.key);
    arrays.push_back(
        {{"file", file}, {"shape", t.shape}, {"dtype", "float32"}, {"state_dict_key", t.key}});
  }
  std::ofstream(dir / "manifest.json") << nlohmann::json{
      {"chapter", kChapter},
      {"options", nlohmann::json::object()},
      {"arrays", arrays}}.dump();
  const std::string what = refusal(dir, into);
  EXPECT_TRUE(contains(what, "the file of generator.bias, \"../generator_bias.npy\", is not a .npy "
                             "file in the checkpoint's folder"))
      << what;
  fs::remove_all(dir);
}

TEST(CheckpointRefusal, AKeyTheModelNeedsIsMissing) {
  Saved s("missing_key");  // post-norm: no encoder.norm, no decoder.norm
  Seq2Seq pre = model(17, config(NormPlacement::pre, false));
  const std::string what = refusal(s.dir, pre);
  EXPECT_EQ(what, s.dir.string() +
                      ": the checkpoint has no encoder.norm.weight, encoder.norm.bias, "
                      "decoder.norm.weight, decoder.norm.bias, which this model needs (was it "
                      "saved with other options?)");
}

TEST(CheckpointRefusal, AKeyTheModelLacks) {
  Saved s("extra_key");  // untied: it has generator.weight
  Seq2Seq tied = model(18, config(NormPlacement::post, true));
  const std::string what = refusal(s.dir, tied);
  EXPECT_EQ(what, s.dir.string() +
                      ": the checkpoint has generator.weight, which this model does not have "
                      "(was it saved with other options?)");
}

TEST(CheckpointRefusal, AShapeThatDiffers) {
  Saved s("shape");  // d_ff 16
  Seq2Seq wider = model(19, config(NormPlacement::post, false, 32));
  EXPECT_EQ(refusal(s.dir, wider),
            s.dir.string() + ": encoder.layers.0.linear1.weight is [16 x 8] in the checkpoint "
                             "but [32 x 8] in this model");
}

TEST(CheckpointRefusal, ATruncatedFile) {
  Saved s("truncated");
  // The last key's file: a load that wrote as it read would have changed everything before it.
  const fs::path file = s.dir / "generator_bias.npy";
  fs::resize_file(file, fs::file_size(file) - 3);
  const std::string what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(what, file.string() + ": shape needs 7 elements of 4 bytes but the file "
                                             "holds 25 data bytes (generator.bias)"))
      << what;
}

TEST(CheckpointRefusal, AMalformedOrMissingFile) {
  Saved s("malformed");
  std::ofstream(s.dir / "decoder_layers_0_norm3_bias.npy") << "not an array";
  std::string what = refusal(s.dir, s.into);
  EXPECT_TRUE(
      contains(what, (s.dir / "decoder_layers_0_norm3_bias.npy").string() + ": not a .npy file"))
      << what;
  EXPECT_TRUE(contains(what, "(decoder.layers.0.norm3.bias)")) << what;
  fs::remove(s.dir / "decoder_layers_0_norm3_bias.npy");
  what = refusal(s.dir, s.into);
  EXPECT_TRUE(contains(
      what, (s.dir / "decoder_layers_0_norm3_bias.npy").string() + ": cannot open for reading"))
      << what;
}

TEST(CheckpointRefusal, AFileThatDisagreesWithTheManifest) {
  Saved s("disagrees");
  const Matrix eight = Matrix::Zero(1, 8);
  course::write_npy(s.dir / "generator_bias.npy", std::vector<std::size_t>{8},
                    std::span<const float>(eight.data(), 8));
  std::string what = refusal(s.dir, s.into);
  EXPECT_EQ(what, (s.dir / "generator_bias.npy").string() +
                      " (generator.bias): the file holds [8] but the manifest says [7]");
  const attn::MatrixD wide = attn::MatrixD::Zero(1, 7);
  course::write_npy(s.dir / "generator_bias.npy", std::vector<std::size_t>{7},
                    std::span<const double>(wide.data(), 7));
  what = refusal(s.dir, s.into);
  EXPECT_EQ(what, (s.dir / "generator_bias.npy").string() +
                      " (generator.bias): the file holds float64 numbers, but the manifest says "
                      "float32");
}

TEST(CheckpointRefusal, NonFiniteValues) {
  const fs::path dir = attn_test::scratch("checkpoint", "nan");
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  Seq2Seq diverged = model(20, c);
  diverged.decoder[0].norm3.beta(0, 2) = std::numeric_limits<float>::quiet_NaN();
  course::save_checkpoint(dir, source(c), diverged);
  Seq2Seq into = model(21, c);
  EXPECT_EQ(refusal(dir, into), (dir / "decoder_layers_0_norm3_bias.npy").string() +
                                    " (decoder.layers.0.norm3.bias): the entry at [2] is nan: "
                                    "the run that saved it had diverged");
  diverged.decoder[0].norm3.beta(0, 2) = 0.5f;
  diverged.encoder[0].ff.linear1.weight(3, 5) = -std::numeric_limits<float>::infinity();
  course::save_checkpoint(dir, source(c), diverged);
  EXPECT_EQ(refusal(dir, into), (dir / "encoder_layers_0_linear1_weight.npy").string() +
                                    " (encoder.layers.0.linear1.weight): the entry at [3, 5] is "
                                    "-inf: the run that saved it had diverged");
  fs::remove_all(dir);
}

// ---- The training state -------------------------------------------------------------------------

// The state of a run that took two Adam steps on `m`, with a batch stream part-way through.
course::TrainingState trained_state(const Seq2Seq& m, std::uint64_t seed) {
  Seq2Seq copy = m;
  Seq2Seq grads = attn::zeros_like(m);
  attn::Rng rng(seed);
  attn::Adam adam({.lr = 0.01});
  for (int t = 0; t < 2; ++t) {
    for (attn::Parameter<float>& g : attn::parameters(grads)) {
      g.value = attn::random_normal(rng, g.value.rows(), g.value.cols());
    }
    adam.step(attn::parameters(copy), attn::parameters(std::as_const(grads)));
  }
  rng.normal();  // a held spare value, so that it too must come back
  return {.step = 2, .steps = 10, .adam = adam.state(), .batches = rng.state()};
}

TEST(CheckpointTrainingState, ComesBackBitForBit) {
  const fs::path dir = attn_test::scratch("checkpoint", "training_state");
  const Seq2SeqConfig c = config(NormPlacement::pre, true);
  const Seq2Seq m = model(40, c);
  const course::TrainingState saved = trained_state(m, 41);
  course::save_checkpoint(dir, source(c), m, saved);
  const nlohmann::json t = manifest_of(dir)["training"];
  EXPECT_EQ(t["step"], 2);
  EXPECT_EQ(t["steps"], 10);
  EXPECT_EQ(t["exp_avg"]["decoder.layers.0.self_attn.in_proj_weight"],
            "optimizer_exp_avg_decoder_layers_0_self_attn_in_proj_weight.npy");
  EXPECT_EQ(
      course::read_npy(dir / "optimizer_exp_avg_sq_decoder_layers_0_self_attn_in_proj_weight.npy")
          .shape,
      (std::vector<std::size_t>{24, 8}))
      << "stacked like in_proj_weight itself, [3E x E]";
  Seq2Seq into = model(42, c);
  const std::optional<course::TrainingState> loaded = course::load_checkpoint(dir, kChapter, into);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 2);
  EXPECT_EQ(loaded->steps, 10);
  EXPECT_EQ(loaded->batches.words, saved.batches.words);
  EXPECT_TRUE(loaded->batches.has_spare);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(loaded->batches.spare),
            std::bit_cast<std::uint64_t>(saved.batches.spare));
  ASSERT_EQ(loaded->adam.size(), saved.adam.size());
  for (std::size_t i = 0; i < saved.adam.size(); ++i) {
    EXPECT_EQ(loaded->adam[i].key, saved.adam[i].key);
    EXPECT_EQ(loaded->adam[i].first, saved.adam[i].first);
    EXPECT_EQ(loaded->adam[i].step, 2);
    EXPECT_TRUE(identical(loaded->adam[i].exp_avg, saved.adam[i].exp_avg)) << saved.adam[i].key;
    EXPECT_TRUE(identical(loaded->adam[i].exp_avg_sq, saved.adam[i].exp_avg_sq));
  }
  // A checkpoint saved without one has none.
  course::save_checkpoint(dir, source(c), m);
  EXPECT_FALSE(course::load_checkpoint(dir, kChapter, into).has_value());
  fs::remove_all(dir);
}

TEST(CheckpointTrainingState, AStateOfAnotherModelIsNotSaved) {
  const fs::path dir = attn_test::scratch("checkpoint", "training_state_other");
  const Seq2SeqConfig c = config(NormPlacement::pre, true);
  course::TrainingState other = trained_state(model(43, c), 44);
  other.adam.pop_back();
  const std::string m =
      attn_test::message_of([&] { course::save_checkpoint(dir, source(c), model(45, c), other); });
  EXPECT_TRUE(contains(m, "save_checkpoint")) << m;
  EXPECT_TRUE(listing(dir).empty());
  fs::remove_all(dir);
}

TEST(CheckpointTrainingState, EveryDefectIsRefusedAndTheModelKept) {
  const Seq2SeqConfig c = config(NormPlacement::pre, true);
  const Seq2Seq m = model(46, c);
  const auto refused_after = [&](const std::string& name, const auto& spoil) {
    const fs::path dir = attn_test::scratch("checkpoint", "training_state_" + name);
    course::save_checkpoint(dir, source(c), m, trained_state(m, 47));
    nlohmann::json manifest = manifest_of(dir);
    spoil(dir, manifest["training"]);
    std::ofstream(dir / "manifest.json") << manifest.dump();
    Seq2Seq into = model(48, c);
    const std::string what = refusal(dir, into);
    fs::remove_all(dir);
    return what;
  };
  using J = nlohmann::json;
  EXPECT_TRUE(contains(refused_after("past", [](const fs::path&, J& t) { t["step"] = 11; }),
                       "says step 11 of 10"));
  EXPECT_TRUE(contains(refused_after("adam", [](const fs::path&, J& t) { t["adam_step"] = 1; }),
                       "with Adam at step 1"));
  EXPECT_TRUE(contains(refused_after("zero_rng",
                                     [](const fs::path&, J& t) {
                                       t["batches_rng"]["words"] = {
                                           "0x0000000000000000", "0x0000000000000000",
                                           "0x0000000000000000", "0x0000000000000000"};
                                     }),
                       "four zero words"));
  EXPECT_TRUE(contains(
      refused_after("word", [](const fs::path&, J& t) { t["batches_rng"]["words"][0] = "12"; }),
      "not 0x and 16 hex digits"));
  EXPECT_TRUE(contains(
      refused_after("missing", [](const fs::path&, J& t) { t["exp_avg"].erase("generator.bias"); }),
      "for the exp_avg of generator.bias"));
  const std::string negative = refused_after("negative", [](const fs::path& dir, J&) {
    const std::vector<float> v = {0.5f, -1e-9f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};  // [7]
    course::write_npy(dir / "optimizer_exp_avg_sq_generator_bias.npy", std::vector<std::size_t>{7},
                      std::span<const float>(v));
  });
  EXPECT_TRUE(contains(negative, "a second moment is negative")) << negative;
  const std::string nan = refused_after("nan", [](const fs::path& dir, J&) {
    const std::vector<float> v(7, std::numeric_limits<float>::quiet_NaN());
    course::write_npy(dir / "optimizer_exp_avg_generator_bias.npy", std::vector<std::size_t>{7},
                      std::span<const float>(v));
  });
  EXPECT_TRUE(contains(nan, "optimizer_exp_avg_generator_bias.npy (exp_avg of generator.bias): "
                            "the entry at [0] is nan"))
      << nan;
}

// ---- The parameter list behind it ---------------------------------------------------------------

TEST(StateDictLayout, StacksTheBlocksOfAKey) {
  const attn::MultiHeadAttention mha = [] {
    attn::Rng rng(22);
    return attn::multi_head_init(rng, 4, 2);
  }();
  const std::vector<course::StateDictTensor> layout =
      course::state_dict_layout(attn::parameters(mha, "attn."));
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout[0].key, "attn.in_proj_weight");
  EXPECT_EQ(layout[0].shape, (std::vector<std::size_t>{12, 4}));
  EXPECT_EQ(layout[0].blocks, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(layout[1].key, "attn.in_proj_bias");
  EXPECT_EQ(layout[1].shape, std::vector<std::size_t>{12});
  EXPECT_EQ(layout[1].blocks, (std::vector<std::size_t>{3, 4, 5}));
  EXPECT_EQ(layout[3].shape, std::vector<std::size_t>{4});
}

TEST(StateDictLayout, RefusesBlocksThatDoNotTile) {
  Matrix a = Matrix::Zero(2, 3), b = Matrix::Zero(2, 3), c = Matrix::Zero(2, 4);
  const auto list = [&](Index second_first, Matrix& second) {
    std::vector<attn::Parameter<float>> l;
    l.push_back({"w", {a.data(), a.rows(), a.cols()}, 0, false});
    l.push_back({"w", {second.data(), second.rows(), second.cols()}, second_first, false});
    return l;
  };
  EXPECT_EQ(course::state_dict_layout(list(2, b)).front().shape, (std::vector<std::size_t>{4, 3}));
  const std::string gap = attn_test::message_of([&] { course::state_dict_layout(list(3, b)); });
  EXPECT_TRUE(contains(gap, "state_dict_layout: w: a block [2 x 3] at 3 does not continue the "
                            "matrix of 2 rows before it"))
      << gap;
  EXPECT_TRUE(contains(attn_test::message_of([&] { course::state_dict_layout(list(2, c)); }),
                       "does not continue"));
}

// ---- scripts/check_training_checkpoint.py -------------------------------------------------------

const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(ATTN_SOURCE_DIR) + "/scripts/check_training_checkpoint.py";

bool have_torch() {
  static const bool yes =
      std::system((kPython + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return yes;
}

// The script on `dir`, its output captured through files in `out`.
attn_test::Output run_script(const fs::path& dir, const fs::path& out) {
  const fs::path o = out / "stdout.txt", e = out / "stderr.txt";
  const std::string cmd = kPython + " '" + kScript + "' '" + dir.string() + "' >'" + o.string() +
                          "' 2>'" + e.string() + "'";
  const int status = std::system(cmd.c_str());
  return {(status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1, attn_test::read_file(o),
          attn_test::read_file(e)};
}

std::vector<int> row(const attn::TokenIds& ids, Index b) {
  return {ids.row(b).data(), ids.row(b).data() + ids.cols()};
}

Index argmax(const Matrix& logits, Index i) {
  Index best = 0;
  logits.row(i).maxCoeff(&best);
  return best;
}

// Pads [k x n] of ids into a float matrix for the dump.
Matrix as_floats(const attn::TokenIds& ids) { return ids.cast<float>(); }

// The reversal checkpoint the chapter writes: weights, eval_src, eval_tgt_in, eval_logits (teacher
// forcing) and eval_greedy (from BOS = 1, the argmax fed back, n steps), computed here in C++.
void save_reversal(const fs::path& dir, const Seq2Seq& m, const Seq2SeqConfig& c,
                   const std::string& task = "reversal") {
  constexpr Index k = 3, n = 6;
  attn::Rng rng(23);
  attn::TokenIds src = attn::TokenIds::Zero(k, n), tgt_in = attn::TokenIds::Zero(k, n);
  const Index lengths[k] = {6, 4, 3};  // PAD = 0 after the tokens
  for (Index b = 0; b < k; ++b) {
    for (Index i = 0; i < lengths[b]; ++i) {
      src(b, i) = 2 + static_cast<int>(rng.uniform() * static_cast<double>(c.vocab - 2));
    }
    tgt_in(b, 0) = 1;  // BOS, then the reversed source without its last token
    for (Index i = 1; i < lengths[b]; ++i) tgt_in(b, i) = src(b, lengths[b] - i);
  }
  std::vector<float> logits;  // [k, n, V]
  attn::TokenIds greedy(k, n);
  for (Index b = 0; b < k; ++b) {
    const std::vector<int> s = row(src, b), t = row(tgt_in, b);
    const Matrix l = attn::seq2seq_forward(m, s, t);  // [n x V]
    logits.insert(logits.end(), l.data(), l.data() + l.size());
    std::vector<int> fed = {1};
    for (Index step = 0; step < n; ++step) {
      const Matrix g = attn::seq2seq_forward(m, s, fed);  // [step+1 x V]
      const int next = static_cast<int>(argmax(g, g.rows() - 1));
      greedy(b, step) = next;
      fed.push_back(next);
    }
  }
  const std::vector<std::size_t> shape = {k, n, static_cast<std::size_t>(c.vocab)};
  course::save_checkpoint(dir, source(c, kChapter, task), m, [&](course::Dumper& d) {
    d("eval_src", as_floats(src));
    d("eval_tgt_in", as_floats(tgt_in));
    d("eval_logits", shape, logits);
    d("eval_greedy", as_floats(greedy));
  });
}

class ReplayScript : public testing::Test {
 protected:
  void SetUp() override {
    if (!have_torch()) GTEST_SKIP() << kPython << " cannot import torch";
    out_ = attn_test::scratch(
        "checkpoint",
        std::string("script_") + testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (!out_.empty()) fs::remove_all(out_);
  }
  fs::path out_;
};

TEST_F(ReplayScript, ReproducesTheReversalLogitsAndGreedyDecodingPostNorm) {
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  save_reversal(out_ / "ckpt", model(24, c), c);
  const attn_test::Output r = run_script(out_ / "ckpt", out_);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "reversal, Seq2Seq V=7 E=8 H=2 F=16 L=1 post-norm untied")) << r.out;
  EXPECT_TRUE(contains(r.out, "logits (teacher forcing, 3 sequences) [3 x 6 x 7]")) << r.out;
  EXPECT_TRUE(contains(r.out, "greedy decoding from BOS, 3 sequences x 6 steps: identical to the "
                              "C++ tokens: ok"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "note:")) << "the options agree with the weights: " << r.out;
  std::cout << r.out;
}

TEST_F(ReplayScript, ReproducesTheReversalLogitsAndGreedyDecodingPreNormTied) {
  const Seq2SeqConfig c = config(NormPlacement::pre, true);
  save_reversal(out_ / "ckpt", model(25, c), c);
  const attn_test::Output r = run_script(out_ / "ckpt", out_);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "pre-norm tied")) << r.out;
  EXPECT_TRUE(contains(r.out, "identical to the C++ tokens: ok")) << r.out;
  std::cout << r.out;
}

TEST_F(ReplayScript, FailsWhenTheLogitsOrTheTokensDiffer) {
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  const fs::path dir = out_ / "ckpt";
  save_reversal(dir, model(26, c), c);
  // One logit off by 1e-3 (the tolerance is 1e-5 of the scale).
  course::NpyArray logits = course::read_npy(dir / "eval_logits.npy");
  std::vector<float> values(logits.data.begin(), logits.data.end());
  values[17] += 1e-3f;
  course::write_npy(dir / "eval_logits.npy", logits.shape, values);
  attn_test::Output r = run_script(dir, out_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAILED")) << r.out;
  EXPECT_TRUE(contains(r.out, "worst at [0, 2, 3]")) << r.out;  // element 17 of [3, 6, 7]

  save_reversal(dir, model(26, c), c);  // intact again; now one greedy token changed
  Matrix greedy = course::read_npy(dir / "eval_greedy.npy").to_matrix();
  greedy(1, 4) = greedy(1, 4) == 2.0f ? 3.0f : 2.0f;
  course::write_npy(dir / "eval_greedy.npy", greedy);
  r = run_script(dir, out_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "DIFFERS from the C++ tokens: FAILED")) << r.out;
  EXPECT_TRUE(contains(r.out, "sequence 1: torch")) << r.out;
  EXPECT_TRUE(contains(r.out, "first difference at step 4")) << r.out;
}

TEST_F(ReplayScript, RefusesAFolderThatIsNotACheckpointOfTheChapter) {
  const Seq2SeqConfig c = config(NormPlacement::post, false);
  course::save_checkpoint(out_ / "ckpt", source(c, "08_transformer_block"), model(27, c));
  attn_test::Output r = run_script(out_ / "ckpt", out_);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "a dump of 08_transformer_block, not of 09_training")) << r.err;
  course::save_checkpoint(out_ / "ckpt", source(c), model(27, c));  // no eval arrays
  r = run_script(out_ / "ckpt", out_);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "the manifest lists no array 'eval_src'")) << r.err;
}

// A run of both tasks saves one checkpoint per task, DIR/reversal and DIR/induction, each
// recording --task both; the script, given DIR, checks the two.
TEST_F(ReplayScript, ReproducesTheInductionLogitsAndChecksBothTasksOfARun) {
  attn::Rng rng(28);
  const attn::AttentionOnly m = attn::attention_only_init(
      rng, {.vocab = 9, .d_model = 8, .heads = 2, .layers = 2, .context = 10});
  attn::AttentionOnly trained = m;  // every entry its own draw, as after training
  for (attn::Parameter<float>& p : attn::parameters(trained)) {
    p.value = attn::random_normal(rng, p.value.rows(), p.value.cols());
  }
  constexpr Index k = 4, n = 10;
  attn::TokenIds ids(k, n);
  for (Index i = 0; i < ids.size(); ++i) ids.data()[i] = static_cast<int>(rng.uniform() * 9.0);
  std::vector<float> logits;  // [k, n, V]
  for (Index b = 0; b < k; ++b) {
    const Matrix l = attn::attention_only_forward(trained, row(ids, b));  // [n x V]
    logits.insert(logits.end(), l.data(), l.data() + l.size());
  }
  const std::vector<std::size_t> shape = {k, n, 9};
  const course::DumpSource s{.chapter = kChapter,
                             .seed = 28,
                             .options = {{"--task", "both"},
                                         {"--vocab", "9"},
                                         {"--d-model", "8"},
                                         {"--heads", "2"},
                                         {"--layers", "2"},
                                         {"--context", "10"}}};
  const fs::path run = out_ / "run";
  course::save_checkpoint(run / "induction", s, trained, [&](course::Dumper& d) {
    d("eval_ids", as_floats(ids));
    d("eval_logits", shape, logits);
  });
  attn::AttentionOnly loaded = m;
  course::load_checkpoint(run / "induction", kChapter, loaded);
  EXPECT_TRUE(same_parameters(trained, loaded)) << "the attention-only model round-trips too";
  const Seq2SeqConfig c = config(NormPlacement::pre, false);
  save_reversal(run / "reversal", model(29, c), c, "both");

  const attn_test::Output r = run_script(run, out_);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "reversal, Seq2Seq V=7 E=8 H=2 F=16 L=1 pre-norm untied")) << r.out;
  EXPECT_TRUE(contains(r.out, "induction, attention-only V=9 E=8 H=2 L=2 T=10")) << r.out;
  EXPECT_TRUE(contains(r.out, "logits (4 sequences) [4 x 10 x 9]")) << r.out;
  EXPECT_TRUE(contains(r.out, "all equal: ok")) << r.out;
  std::cout << r.out;
}

// A resumed run must take at least one step of its schedule: the boundaries by hand.
TEST(ResumeProblem, ARunMustStopPastTheCheckpointAndWithinTheSchedule) {
  course::TrainingState saved;
  saved.step = 400;
  saved.steps = 800;
  const auto problem = [&](std::int64_t steps, std::int64_t stop_at) {
    return course::resume_problem("--load: run", saved, steps, stop_at, "train longer");
  };
  EXPECT_EQ(problem(800, 0), "");    // on to the end of the schedule
  EXPECT_EQ(problem(800, 401), "");  // one step more
  EXPECT_EQ(problem(800, 800), "");
  EXPECT_EQ(problem(800, 400),
            "--load: run has trained 400 steps already, and this run would stop at step 400: "
            "train longer");
  EXPECT_EQ(problem(400, 0),
            "--load: run has trained 400 steps already, and this run would stop at step 400: "
            "train longer");
  EXPECT_EQ(problem(800, 801), "--stop-at 801 is past the end of the schedule, step 800");
}

}  // namespace test_checkpoint
