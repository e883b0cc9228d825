// Every chapter against the inputs a curious learner will try: unknown options, negative,
// zero, NaN and huge values, knobs that contradict each other, folders that cannot be written.
// Each row must end with exit code 2, the problem named on stderr, the usage after it,
// nothing on stdout (no work was started) and no file written anywhere.
#include "chapter_run.hpp"
#include "chapters.hpp"  // kChapters, generated from ATTN_CHAPTERS

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using attn_test::kChapters;

namespace fs = std::filesystem;

struct BadInput {
  const char* chapter;
  const char* args;
  const char* mentions;  // a word the error message must contain
};

// Options every chapter shares, checked for each chapter below.
const std::vector<std::pair<std::string, std::string>> kCommon = {
    {"--no-such-option", "no-such-option"},
    {"--seed -1", "seed"},
    {"--seed 12x", "seed"},
    {"--seed 99999999999999999999999", "seed"},
    {"--seed", "seed"},
    {"positional", "positional"},
    {"--out", "--out"},
};

// Each chapter's own knobs: negative, zero, NaN, beyond the machine, contradictory.
const BadInput kKnobs[] = {
    {"01_rnn", "--hidden -1", "hidden"},
    {"01_rnn", "--hidden 0", "hidden"},
    {"01_rnn", "--hidden 1000000", "hidden"},
    {"01_rnn", "--steps 0", "steps"},
    {"01_rnn", "--input-size 1e9", "input-size"},
    {"01_rnn", "--scales nan", "scales"},
    {"01_rnn", "--scales 1,x", "scales"},
    {"01_rnn", "--distance 100000", "distance"},
    {"02_attention_by_hand", "--scale=maybe", "scale"},
    {"03_vectorized_qkv", "--n 0", "n"},
    {"03_vectorized_qkv", "--d-model 99999999", "d-model"},
    {"04_softmax_scaling", "--samples -5", "samples"},
    {"04_softmax_scaling", "--samples 1000000000000", "samples"},
    {"04_softmax_scaling", "--std nan", "std"},
    {"04_softmax_scaling", "--std 0", "std"},
    {"04_softmax_scaling", "--d-k 0", "d-k"},
    {"05_masking", "--window -1", "window"},
    {"05_masking", "--mask diagonal", "mask"},
    {"05_masking", "--fill 0", "fill"},
    {"05_masking", "--ids 1,x", "ids"},
    {"05_masking", "--ids 1,2/3", "ids"},
    {"05_masking", "--ids 12", "ids"},
    {"05_masking", "--d-model 0", "d-model"},
    {"05_masking", "--d-model 100000000", "d-model"},
    {"06_multi_head", "--heads 3", "heads"},
    {"06_multi_head", "--heads 0", "heads"},
    {"06_multi_head", "--d-model -512", "d-model"},
    {"06_multi_head", "--seq-len 100000", "seq-len"},
    {"06_multi_head", "--mask window", "mask"},
    {"07_positional_encoding", "--d-model 0", "d-model"},
    {"07_positional_encoding", "--positions -1", "positions"},
    {"07_positional_encoding", "--max-offset -1", "max-offset"},
    {"07_positional_encoding", "--d-model 100000000", "d-model"},
    {"08_transformer_block", "--heads 3", "heads"},
    {"08_transformer_block", "--layers 0", "layers"},
    {"08_transformer_block", "--d-ff 0", "d-ff"},
    {"08_transformer_block", "--norm sideways", "norm"},
    {"08_transformer_block", "--d-model 100000", "d-model"},
};

// Every regular file below `dir`.
std::vector<std::string> files_below(const fs::path& dir) {
  std::vector<std::string> found;
  if (!fs::exists(dir)) return found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) found.push_back(e.path().string());
  }
  return found;
}

void expect_usage_error(const std::string& chapter, const std::string& args,
                        const std::string& mentions) {
  const fs::path dir = attn_test::scratch("bad_input", chapter);
  // Real, writable folders for the figures and the dump: the chapter must not use them.
  const std::string folders =
      " --out '" + (dir / "plots").string() + "' --dump '" + (dir / "dump").string() + "' ";
  const attn_test::Output r = attn_test::run_chapter(chapter, folders + args, dir);
  const std::string what = chapter + " " + args;
  EXPECT_EQ(r.code, 2) << what << "\nstdout: " << r.out.substr(0, 300) << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind(chapter + ": ", 0), 0u) << what << ": the message starts with the program";
  EXPECT_TRUE(attn_test::contains(r.err, mentions)) << what << ": the message names the problem\n"
                                                    << r.err;
  EXPECT_TRUE(attn_test::contains(r.err, "Usage:")) << what << ": the usage follows\n" << r.err;
  EXPECT_EQ(r.out.substr(0, 300), "") << what << ": nothing may run before the options are checked";
  std::vector<std::string> written;
  for (const char* sub : {"plots", "dump"}) {
    for (const std::string& f : files_below(dir / sub)) written.push_back(f);
  }
  EXPECT_TRUE(written.empty()) << what << ": wrote " << written.size() << " files, e.g. "
                               << (written.empty() ? "" : written.front());
  fs::remove_all(dir);
}

TEST(BadInput, CommonOptionsOfEveryChapter) {
  for (const char* chapter : kChapters) {
    for (const auto& [args, mentions] : kCommon) expect_usage_error(chapter, args, mentions);
  }
}

TEST(BadInput, EveryChaptersKnobs) {
  for (const BadInput& b : kKnobs) expect_usage_error(b.chapter, b.args, b.mentions);
}

TEST(BadInput, FoldersThatCannotBeWritten) {
  // A path below a regular file can be neither created nor written, even by root (a chmod'ed
  // folder would not stop root, who runs CI here).
  const fs::path dir = attn_test::scratch("bad_input", "folders");
  const fs::path file = dir / "a_file";
  std::ofstream(file) << "not a folder";
  for (const char* chapter : kChapters) {
    for (const std::string option : {"--out", "--dump"}) {
      // (--no-plots would make --out irrelevant, so it goes only with the --dump case.)
      const std::string other = option == "--dump" ? " --no-plots" : "";
      const attn_test::Output r = attn_test::run_chapter(
          chapter, option + " '" + (file / "sub").string() + "'" + other, dir);
      EXPECT_EQ(r.code, 2) << chapter << " " << option << "\n" << r.err;
      EXPECT_TRUE(attn_test::contains(r.err, option + ": cannot create folder")) << r.err;
      EXPECT_EQ(r.out, "") << chapter << " " << option;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
