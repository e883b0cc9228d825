// course::Dumper and course::dump_parameters: a layer's parameters written under PyTorch's
// state_dict keys (files named by the key with dots as underscores, vectors 1-D as PyTorch holds
// them), read back with course::read_npy: every name, in order, every array equal to the
// parameter it came from, bit for bit, and a manifest that lists them; a folder cleared of the
// earlier run's arrays, a failed run's arrays removed, foreign arrays refused.
#include "attn/core/random.hpp"
#include "attn/layers/multi_head.hpp"
#include "attn/layers/transformer.hpp"
#include "course/dump.hpp"
#include "course/files.hpp"
#include "course/npy.hpp"

#include "chapter_run.hpp"
#include "child_process.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace test_dump {

using attn::Matrix;
using attn_test::identical;

// A state_dict key, the parameter it must hold, and whether PyTorch holds it as a 1-D vector
// (biases and LayerNorm's weight and bias) or a 2-D matrix, in the order dump_parameters
// documents.
struct Param {
  std::string key;
  Matrix value;
  bool vector;
};
using Expected = std::vector<Param>;

void add_mha(Expected& e, const std::string& p, const attn::MultiHeadAttention& m) {
  e.push_back({p + "in_proj_weight", attn::in_proj_weight(m), false});
  e.push_back({p + "in_proj_bias", attn::in_proj_bias(m), true});
  e.push_back({p + "out_proj.weight", m.out_proj.weight, false});
  e.push_back({p + "out_proj.bias", m.out_proj.bias, true});
}

void add_ffn(Expected& e, const std::string& p, const attn::FeedForward& ff) {
  e.push_back({p + "linear1.weight", ff.linear1.weight, false});
  e.push_back({p + "linear1.bias", ff.linear1.bias, true});
  e.push_back({p + "linear2.weight", ff.linear2.weight, false});
  e.push_back({p + "linear2.bias", ff.linear2.bias, true});
}

void add_norm(Expected& e, const std::string& p, const attn::LayerNorm& norm) {
  e.push_back({p + "weight", norm.gamma, true});
  e.push_back({p + "bias", norm.beta, true});
}

std::string file_of(std::string key) {
  std::replace(key.begin(), key.end(), '.', '_');
  return key;
}

nlohmann::json manifest_of(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json");
  return nlohmann::json::parse(in);
}

// Every expected file is there and holds its parameter with PyTorch's shape; the manifest
// lists each under its key, in the documented order; nothing else was written.
void expect_written(const fs::path& dir, course::Dumper& dump, const Expected& expected) {
  dump.finish();
  const nlohmann::json m = manifest_of(dir);
  ASSERT_EQ(m["arrays"].size(), expected.size());
  std::string names;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Param& p = expected[i];
    const std::string name = file_of(p.key);
    names += (names.empty() ? " " : ", ") + name;
    const course::NpyArray a = course::read_npy(dir / (name + ".npy"));
    const auto rows = static_cast<std::size_t>(p.value.rows());
    const auto cols = static_cast<std::size_t>(p.value.cols());
    const std::vector<std::size_t> shape =
        p.vector ? std::vector<std::size_t>{cols} : std::vector<std::size_t>{rows, cols};
    EXPECT_EQ(a.shape, shape) << p.key;
    EXPECT_TRUE(identical(a.to_matrix(), p.value)) << p.key;
    EXPECT_EQ(m["arrays"][i]["state_dict_key"], p.key);
    EXPECT_EQ(m["arrays"][i]["file"], name + ".npy");
    EXPECT_EQ(m["arrays"][i]["shape"], a.shape) << p.key;
    EXPECT_EQ(m["arrays"][i]["dtype"], "float32") << p.key;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}),
            static_cast<std::ptrdiff_t>(expected.size() + 1))  // + manifest.json
      << "no INCOMPLETE.txt and nothing else once finished";
  EXPECT_EQ(dump.summary(), "wrote " + std::to_string(expected.size()) + " arrays to " +
                                dir.string() + "/:" + names + " (listed in manifest.json)");
}

TEST(DumpParameters, EncoderLayerUnderItsStateDictKeys) {
  attn::Rng rng(21);
  attn::EncoderLayer layer = attn::encoder_layer_init(rng, 4, 2, 6);  // d_model 4, d_ff 6
  layer.norm2.gamma << 1.0f, 2.0f, 3.0f, 4.0f;  // apart from norm1's, so a swap would show
  const fs::path dir = attn_test::scratch("dump", "encoder");
  course::Dumper dump(dir);
  course::dump_parameters(dump, "encoder.layers.0.", layer);
  Expected e;
  add_mha(e, "encoder.layers.0.self_attn.", layer.self_attn);
  add_ffn(e, "encoder.layers.0.", layer.ff);
  add_norm(e, "encoder.layers.0.norm1.", layer.norm1);
  add_norm(e, "encoder.layers.0.norm2.", layer.norm2);
  ASSERT_EQ(e.size(), 12u);
  EXPECT_EQ(e[0].value.rows(), 12);  // in_proj_weight [3E x E]
  expect_written(dir, dump, e);
  fs::remove_all(dir);
}

TEST(DumpParameters, DecoderLayerAddsTheCrossAttentionAndAThirdNorm) {
  attn::Rng rng(22);
  attn::DecoderLayer layer = attn::decoder_layer_init(rng, 4, 2, 6);
  layer.norm3.beta << 0.5f, -0.5f, 0.25f, -0.25f;  // apart from the other norms' zeros
  const fs::path dir = attn_test::scratch("dump", "decoder");
  course::Dumper dump(dir);
  course::dump_parameters(dump, "decoder.layers.1.", layer);
  Expected e;
  add_mha(e, "decoder.layers.1.self_attn.", layer.self_attn);
  add_mha(e, "decoder.layers.1.multihead_attn.", layer.multihead_attn);
  add_ffn(e, "decoder.layers.1.", layer.ff);
  add_norm(e, "decoder.layers.1.norm1.", layer.norm1);
  add_norm(e, "decoder.layers.1.norm2.", layer.norm2);
  add_norm(e, "decoder.layers.1.norm3.", layer.norm3);
  ASSERT_EQ(e.size(), 18u);
  expect_written(dir, dump, e);
  fs::remove_all(dir);
}

TEST(DumpParameters, ADisabledDumperWritesNothing) {
  attn::Rng rng(23);
  const fs::path dir = attn_test::scratch("dump", "disabled");
  const fs::path here = fs::current_path();
  fs::current_path(dir);  // a disabled dumper must not write into the working folder either
  course::Dumper off;
  course::dump_parameters(off, "encoder.layers.0.", attn::encoder_layer_init(rng, 4, 2, 6));
  off.finish();  // no manifest either
  fs::current_path(here);
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_EQ(off.summary(), "");
  fs::remove_all(dir);
}

// ---- The dump folder ---------------------------------------------------------------------------

using attn_test::listing;

course::DumpSource source(std::uint64_t seed = 1) {
  return {.chapter = "00_test", .seed = seed, .options = {{"--layers", "2"}, {"--norm", "pre"}}};
}

// The hidden folder a Dumper of this process writes its arrays into until finish().
std::string staging_name() { return course::kDumpStagingPrefix + std::to_string(::getpid()); }

TEST(Dumper, TheManifestComesLastAndRecordsTheRun) {
  const fs::path dir = attn_test::scratch("dump", "manifest");
  course::Dumper dump(dir, source(7));
  dump("w", Matrix(Matrix::Constant(2, 3, 1.5f)));  // [2 x 3]
  EXPECT_EQ(listing(dir), std::vector<std::string>{staging_name()})
      << "while it writes, the arrays are out of sight, and there is no manifest";
  EXPECT_EQ(listing(dir / staging_name()), std::vector<std::string>{"w.npy"});
  dump("b", attn::RowVector(attn::RowVector::Constant(4, 0.5f)));  // [4]
  dump.finish();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"b.npy", "manifest.json", "w.npy"}));
  const nlohmann::json m = manifest_of(dir);
  EXPECT_EQ(m["chapter"], "00_test");
  EXPECT_EQ(m["seed"], 7);
  EXPECT_EQ(m["options"]["--layers"], "2");
  EXPECT_EQ(m["options"]["--norm"], "pre");
  ASSERT_EQ(m["arrays"].size(), 2u);
  EXPECT_EQ(m["arrays"][0]["shape"], (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(m["arrays"][1]["shape"], std::vector<std::size_t>{4}) << "a vector is 1-D";
  EXPECT_EQ(course::read_npy(dir / "b.npy").shape, std::vector<std::size_t>{4});
  EXPECT_FALSE(m["arrays"][0].contains("state_dict_key")) << "only parameters have a key";
  fs::remove_all(dir);
}

TEST(Dumper, ANewRunRemovesTheEarlierRunsArraysOnly) {
  const fs::path dir = attn_test::scratch("dump", "stale");
  {
    course::Dumper first(dir, source());
    first("layer_0", Matrix(Matrix::Zero(1, 1)));
    first("layer_1", Matrix(Matrix::Zero(1, 1)));
    first.finish();
  }
  std::ofstream(dir / "notes.txt") << "a learner's own notes";  // not an array: left alone
  course::Dumper second(dir, source());
  second("layer_0", Matrix(Matrix::Ones(1, 1)));
  second.finish();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"layer_0.npy", "manifest.json", "notes.txt"}));
  EXPECT_EQ(course::read_npy(dir / "layer_0.npy").data, std::vector<double>{1.0});
  fs::remove_all(dir);
}

TEST(Dumper, UntilItFinishesTheFolderHoldsTheEarlierDumpUntouched) {
  const fs::path dir = attn_test::scratch("dump", "earlier_whole");
  {
    course::Dumper first(dir, source(1));
    first("old", Matrix(Matrix::Constant(1, 1, 1.0f)));
    first("shared", Matrix(Matrix::Constant(1, 1, 1.0f)));
    first.finish();
  }
  const std::string manifest = attn_test::read_file(dir / "manifest.json");
  course::Dumper second(dir, source(2));
  second("shared", Matrix(Matrix::Constant(1, 1, 2.0f)));
  second("new", Matrix(Matrix::Constant(1, 1, 2.0f)));
  // Half-way, the earlier dump is all there is to read: its manifest, its numbers.
  EXPECT_EQ(attn_test::read_file(dir / "manifest.json"), manifest);
  EXPECT_EQ(course::read_npy(dir / "shared.npy").data, std::vector<double>{1.0});
  EXPECT_FALSE(fs::exists(dir / "new.npy"));
  second.abandon();  // the run failed: the earlier dump stays as it was, nothing of this one
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "old.npy", "shared.npy"}));
  EXPECT_EQ(attn_test::read_file(dir / "manifest.json"), manifest);
  fs::remove_all(dir);
}

TEST(Dumper, ARunKilledBeforeItFinishedLeavesOnlyItsHiddenFolderForTheNextRun) {
  const fs::path dir = attn_test::scratch("dump", "killed");
  fs::create_directories(dir / ".writing-999999999");  // what a kill -9 leaves
  std::ofstream(dir / ".writing-999999999" / "partial.npy") << "half";
  EXPECT_EQ(course::check_dump_folder(dir), "") << "the course's own leftovers are no obstacle";
  course::Dumper next(dir, source());
  next("whole", Matrix(Matrix::Zero(1, 1)));
  next.finish();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "whole.npy"}));
  fs::remove_all(dir);
}

TEST(Dumper, AManifestOrJournalAnotherProgramWroteIsNotTrusted) {
  // Their lists name files that are not the course's to remove: the folder is refused instead.
  const fs::path dir = attn_test::scratch("dump", "foreign_lists");
  std::ofstream(dir / "results.npy") << "a learner's data";
  std::ofstream(dir / "manifest.json") << R"({"tool": "x", "arrays": [{"file": "results.npy"}]})";
  EXPECT_TRUE(attn_test::contains(course::check_dump_folder(dir),
                                  "manifest.json is not a dump manifest of the course"));
  fs::remove(dir / "manifest.json");
  std::ofstream(dir / "INCOMPLETE.txt") << "my notes\nresults.npy\n";
  EXPECT_TRUE(attn_test::contains(course::check_dump_folder(dir),
                                  "INCOMPLETE.txt is not the journal of a dump of the course"));
  course::Dumper dump(dir, source());
  EXPECT_THROW(dump("w", Matrix(Matrix::Zero(1, 1))), course::WriteError);
  dump.abandon();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"INCOMPLETE.txt", "results.npy"}));
  fs::remove_all(dir);
}

TEST(Dumper, ALinkPlantedUnderTheHiddenFolderNameIsNeverFollowed) {
  const fs::path dir = attn_test::scratch("dump", "planted_link");
  fs::create_directories(dir / "d");
  fs::create_directories(dir / "victim");
  std::ofstream(dir / "victim" / "precious.npy") << "keep";
  fs::create_directory_symlink(dir / "victim", dir / "d" / staging_name());
  course::Dumper dump(dir / "d", source());
  dump("w", Matrix(Matrix::Zero(1, 1)));
  dump.finish();
  EXPECT_EQ(listing(dir / "d"), (std::vector<std::string>{"manifest.json", "w.npy"}));
  EXPECT_EQ(listing(dir / "victim"), std::vector<std::string>{"precious.npy"});
  fs::remove_all(dir);
}

TEST(Dumper, AJournalOfARunKilledWhileMovingIsClearedByTheNextRun) {
  // Only a kill -9 in the milliseconds finish() moves files can leave INCOMPLETE.txt: it lists
  // both runs' files, and the next run removes every one of them.
  const fs::path dir = attn_test::scratch("dump", "journal");
  std::ofstream(dir / "INCOMPLETE.txt")
      << "# 00_test was moving a finished dump into this folder and was killed\n# (kill -9)\n"
         "old.npy\nnew.npy\n";
  std::ofstream(dir / "old.npy") << "x";
  std::ofstream(dir / "new.npy") << "x";
  EXPECT_EQ(course::check_dump_folder(dir), "");
  course::Dumper next(dir, source());
  next("other", Matrix(Matrix::Zero(1, 1)));
  next.finish();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "other.npy"}));
  fs::remove_all(dir);
}

TEST(Dumper, AFolderWhereAnArrayGoesIsRefusedBeforeTheEarlierDumpIsTouched) {
  const fs::path dir = attn_test::scratch("dump", "blocked");
  {
    course::Dumper first(dir, source());
    first("kept", Matrix(Matrix::Zero(1, 1)));
    first.finish();
  }
  fs::create_directories(dir / "blocked.npy");
  course::Dumper dump(dir, source());
  dump("blocked", Matrix(Matrix::Zero(1, 1)));
  const std::string what = [&] {
    try {
      dump.finish();
    } catch (const course::WriteError& e) {
      return std::string(e.what());
    }
    return std::string("(no exception)");
  }();
  EXPECT_EQ(what, "cannot write " + (dir / "blocked.npy").string() + ": a folder has that name");
  dump.abandon();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"blocked.npy", "kept.npy", "manifest.json"}));
  fs::remove_all(dir);
}

TEST(Dumper, AbandonRemovesWhatThisRunWrote) {
  const fs::path dir = attn_test::scratch("dump", "abandon");
  course::Dumper dump(dir, source());
  dump("a", Matrix(Matrix::Zero(2, 2)));
  dump("b", Matrix(Matrix::Zero(2, 2)));
  dump.abandon();
  EXPECT_TRUE(listing(dir).empty());
  fs::remove_all(dir);
}

TEST(Dumper, OneWriterAtATime) {
  const fs::path dir = attn_test::scratch("dump", "one_writer");
  course::Dumper dump(dir, source());
  dump("mine", Matrix(Matrix::Zero(1, 1)));  // from here to finish() the folder is locked
  const int code = attn_test::in_child([&] {
    course::Dumper other(dir, source(2));
    try {
      other("theirs", Matrix(Matrix::Zero(1, 1)));
    } catch (const course::WriteError& e) {
      return std::string(e.what()).find("is being written or read by another run") !=
                     std::string::npos
                 ? 0
                 : 2;
    }
    return 1;
  });
  EXPECT_EQ(code, 0) << "a second writer is refused (1: it wrote; 2: another message)";
  dump.finish();
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "mine.npy"}));
  fs::remove_all(dir);
}

TEST(Dumper, RecordAddsAFieldToTheManifest) {
  const fs::path dir = attn_test::scratch("dump", "record");
  course::Dumper dump(dir, source());
  dump.record("training", R"({"step": 3, "words": ["0x01"]})");
  EXPECT_NE(attn_test::message_of([&] { dump.record("training", "{}"); }).find("already"),
            std::string::npos);
  EXPECT_NE(attn_test::message_of([&] { dump.record("seed", "1"); }).find("already"),
            std::string::npos);
  EXPECT_NE(attn_test::message_of([&] { dump.record("x", "{not json"); }).find("not the text"),
            std::string::npos);
  dump.finish();
  const nlohmann::json m = manifest_of(dir);
  EXPECT_EQ(m["training"]["step"], 3);
  EXPECT_EQ(m["training"]["words"][0], "0x01");
  fs::remove_all(dir);
}

TEST(Dumper, AFifoInPlaceOfTheManifestIsRefusedNotWaitedOn) {
  const fs::path dir = attn_test::scratch("dump", "fifo");
  ASSERT_EQ(::mkfifo((dir / "manifest.json").c_str(), 0600), 0);
  const int code = attn_test::in_child_within(10, [&] {
    return course::check_dump_folder(dir).find("not a regular file (a FIFO)") != std::string::npos
               ? 0
               : 1;
  });
  EXPECT_EQ(code, 0) << "-1: it waited for a writer";
  fs::remove_all(dir);
}

TEST(Dumper, ForeignArraysMakeTheFolderUnusable) {
  const fs::path dir = attn_test::scratch("dump", "foreign");
  EXPECT_EQ(course::check_dump_folder(dir / "not_yet"), "") << "a new folder is fine";
  EXPECT_EQ(course::check_dump_folder(dir), "") << "an empty one too";
  std::ofstream(dir / "mine.npy") << "x";
  std::ofstream(dir / "readme.txt") << "x";  // other files are no concern
  const std::string problem = course::check_dump_folder(dir);
  EXPECT_TRUE(attn_test::contains(problem, "1 .npy file(s)")) << problem;
  EXPECT_TRUE(attn_test::contains(problem, "mine.npy")) << problem;
  std::ofstream(dir / "manifest.json") << "{ not json";
  EXPECT_TRUE(attn_test::contains(course::check_dump_folder(dir), "is not a dump manifest"));
  fs::remove_all(dir);
}

TEST(Dumper, ADoctoredManifestCannotSendTheCleanUpElsewhere) {
  const fs::path dir = attn_test::scratch("dump", "doctored");
  fs::create_directories(dir / "d");
  std::ofstream(dir / "keep.npy") << "outside the dump folder";
  std::ofstream(dir / "d" / "notes.txt") << "a learner's own notes";
  fs::create_directories(dir / "d" / "sub.npy");
  // JSON's \u0000 becomes a NUL inside the name, which the system call would cut short:
  // "notes.txt\0.npy" would be notes.txt, "\0.npy" the dump folder itself.
  std::ofstream(dir / "d" / "manifest.json")
      << R"({"written_by": "Attention, Step by Step: course::Dumper",)"
      << R"( "arrays": [{"file": "../keep.npy"}, {"file": "/etc/passwd.npy"},)"
      << R"( {"file": "notes.txt\u0000.npy"}, {"file": "\u0000.npy"}, {"file": "sub.npy"}]})";
  course::Dumper dump(dir / "d", source());
  dump("x", Matrix(Matrix::Zero(1, 1)));
  dump.finish();
  EXPECT_TRUE(fs::exists(dir / "keep.npy"));
  EXPECT_TRUE(fs::exists(dir / "d" / "notes.txt"));
  EXPECT_TRUE(fs::is_directory(dir / "d" / "sub.npy")) << "a folder is never removed";
  EXPECT_TRUE(fs::exists(dir / "d" / "x.npy"));
  fs::remove_all(dir);
}

TEST(Dumper, ALargeDumpIsNotedOnStderrOnce) {
  const fs::path dir = attn_test::scratch("dump", "large");
  course::DumpSource s = source();
  s.note_above_bytes = 1000;  // the real threshold is 256 MiB; the rule is the same
  course::Dumper dump(dir, s);
  testing::internal::CaptureStderr();
  dump("small", Matrix(Matrix::Zero(10, 10)));  // 400 bytes: below
  const std::string before = testing::internal::GetCapturedStderr();
  testing::internal::CaptureStderr();
  dump("big", Matrix(Matrix::Zero(20, 10)));   // 400 + 800 bytes: past it
  dump("more", Matrix(Matrix::Zero(20, 10)));  // still past: no second note
  const std::string after = testing::internal::GetCapturedStderr();
  EXPECT_EQ(before, "");
  EXPECT_TRUE(attn_test::contains(after, "00_test: note: the dump in")) << after;
  EXPECT_EQ(after.find("note"), after.rfind("note")) << "once: " << after;
  fs::remove_all(dir);
}

}  // namespace test_dump
