// Every chapter against the inputs a curious learner will try: unknown options, negative,
// zero, NaN and huge values, knobs that contradict each other, folders that cannot be written.
// Each row must end with exit code 2, the problem named on stderr, the usage after it,
// nothing on stdout (no work was started) and nothing written anywhere: no file, and not the
// --out or --dump folder either, nor a parent folder made on the way to it.
#include "chapter_run.hpp"
#include "chapters.hpp"  // kChapters, generated from ATTN_CHAPTERS

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace test_bad_input {

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
    // Integers are whole numbers in decimal digits; the message says so and names the option.
    {"--seed 10.0", "--seed: '10.0' is not a whole number"},
    // An empty --dump names no folder: refused like an empty --out, not read as "no dump".
    {"--dump ''", "--dump: the folder name is empty"},
    {"--out ''", "--out: the folder name is empty"},
    // A usage error wins over --help, wherever the --help is.
    {"--no-such-option --help", "no-such-option"},
    {"--help --no-such-option", "no-such-option"},
    {"-h positional", "positional"},
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
    {"09_training", "--steps 0", "steps"},
    {"09_training", "--lr nan", "lr"},
    {"09_training", "--lr -0.001", "lr"},
    {"09_training", "--lr 5", "lr"},
    {"09_training", "--heads 3", "heads"},
    {"09_training", "--length 33", "length"},
    {"09_training", "--context 100", "context"},
    {"09_training", "--task sorting", "task"},
    {"09_training", "--label-smoothing 1.5", "label-smoothing"},
    {"09_training", "--norm sideways", "norm"},
    {"10_efficient_attention", "--n 0", "n"},
    {"10_efficient_attention", "--n 65", "n"},
    {"10_efficient_attention", "--d 0", "d"},
    {"10_efficient_attention", "--query-tile 0", "query-tile"},
    {"10_efficient_attention", "--key-tile -1", "key-tile"},
    {"10_efficient_attention", "--mask diagonal", "mask"},
    {"10_efficient_attention", "--mask pad --padding 11", "padding"},
    {"10_efficient_attention", "--row 1", "row"},
    {"10_efficient_attention", "--row 1,nan", "row"},
    {"10_efficient_attention", "--row 1,inf", "row"},
    {"10_efficient_attention", "--row 1,1e9", "row"},
    {"10_efficient_attention", "--row 1,,2", "--row: entry 2 of '1,,2' is empty"},
    {"10_efficient_attention", "--split 8", "split"},
    {"10_efficient_attention", "--split 0", "split"},
    {"10_efficient_attention", "--measure --measure-n 15", "measure-n"},
    {"10_efficient_attention", "--measure --measure-n 4097", "measure-n"},
    {"10_efficient_attention", "--measure-n 64", "--measure-n needs --measure"},
    {"11_decoding", "--heads 3", "heads"},
    {"11_decoding", "--heads 16", "even d_k"},
    {"11_decoding", "--kv-heads 3", "kv-heads"},
    {"11_decoding", "--kv-heads 0", "kv-heads"},
    {"11_decoding", "--d-model 100000", "d-model"},
    {"11_decoding", "--layers 0", "layers"},
    {"11_decoding", "--window -1", "window"},
    {"11_decoding", "--window 17", "window"},
    {"11_decoding", "--prompt 0", "prompt"},
    {"11_decoding", "--new 1000000", "new"},
    {"11_decoding", "--layout rotate_half", "layout"},
    {"11_decoding", "--measure --measure-n 127", "measure-n"},
    {"11_decoding", "--measure-n 256", "--measure-n needs --measure"},
    // Whole numbers only, in decimal digits, for every integer knob: the message says which
    // option and that the value is not a whole number (CLI11 alone said "not in range").
    {"01_rnn", "--hidden 4.0", "--hidden: '4.0' is not a whole number"},
    {"01_rnn", "--steps 0x5", "--steps: '0x5' is not a whole number"},
    {"03_vectorized_qkv", "--d-model 0b1", "--d-model: '0b1' is not a whole number"},
    {"04_softmax_scaling", "--d-k 64.0", "--d-k: '64.0' is not a whole number"},
    {"04_softmax_scaling", "--samples 1e3", "--samples: '1e3' is not a whole number"},
    {"05_masking", "--window ' 1'", "--window: ' 1' is not a whole number"},
    {"06_multi_head", "--heads 8.", "--heads: '8.' is not a whole number"},
    {"07_positional_encoding", "--positions 0x10", "--positions: '0x10' is not a whole number"},
    {"08_transformer_block", "--layers 2.5", "--layers: '2.5' is not a whole number"},
    {"09_training", "--steps 1e3", "--steps: '1e3' is not a whole number"},
    {"10_efficient_attention", "--key-tile 3.0", "--key-tile: '3.0' is not a whole number"},
    // Numbers as written in decimal, the whole text (course/numbers.hpp): a hexadecimal number,
    // a space, "inf" or an empty list entry was read as something else or dropped without a
    // word ("--row 0x10,1" ran with 16, "--row 1,2," with two entries).
    {"10_efficient_attention", "--row 0x10,1", "--row: '0x10' is not a number in decimal digits"},
    {"10_efficient_attention", "--row 0x1p3,1", "--row: '0x1p3' is not a number in decimal"},
    {"10_efficient_attention", "--row '1, 2'", "--row: ' 2' is not a number in decimal digits"},
    {"10_efficient_attention", "--row 1,2,", "--row: entry 3 of '1,2,' is empty"},
    {"10_efficient_attention", "--row=,1,2", "--row: entry 1 of ',1,2' is empty"},
    {"10_efficient_attention", "--row inf,1", "--row: 'inf' is not a finite number"},
    {"01_rnn", "--scales 1,2,", "--scales: entry 3 of '1,2,' is empty"},
    {"01_rnn", "--scales 0x2", "--scales: '0x2' is not a number in decimal digits"},
    {"04_softmax_scaling", "--std 0x1p0", "--std: '0x1p0' is not a number in decimal digits"},
    {"04_softmax_scaling", "--std ' 1'", "--std: ' 1' is not a number in decimal digits"},
    {"09_training", "--lr 1e-3x", "--lr: '1e-3x' is not a number in decimal digits"},
    {"09_training", "--lr 0x1p-10", "--lr: '0x1p-10' is not a number in decimal digits"},
    {"05_masking", "--ids 1,2,", "--ids: id 3 of sentence 1 of '1,2,' is empty"},
    {"05_masking", "--ids 1,2/", "--ids: sentence 2 of '1,2/' is empty"},
    {"05_masking", "--ids ' 1,2'", "--ids: ' 1' is not a token id"},
    {"05_masking", "--ids 0x1,2", "--ids: '0x1' is not a token id"},
};

// Everything below `dir`, folders too.
std::set<std::string> entries_below(const fs::path& dir) {
  std::set<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) found.insert(e.path().string());
  return found;
}

// `args` with every "{dir}" replaced by the run's scratch folder.
std::string in_dir(std::string args, const fs::path& dir) {
  for (std::size_t at; (at = args.find("{dir}")) != std::string::npos;) {
    args.replace(at, 5, dir.string());
  }
  return args;
}

// Runs `chapter args` and expects a usage error that wrote nothing. Unless `args` gives its
// own, --out and --dump name real folders that do not exist yet, nested so that a parent made
// on the way would show as well (like `--out new --dump new2/x/y`): the run must create
// neither. `prepare` sets up the scratch folder first ("{dir}" in args); returns the output.
attn_test::Output expect_usage_error(const std::string& chapter, const std::string& args,
                                     const std::string& mentions,
                                     const std::function<void(const fs::path&)>& prepare = {}) {
  const fs::path dir = attn_test::scratch("bad_input", chapter);
  if (prepare) prepare(dir);
  const fs::path out = dir / "new" / "plots", dump = dir / "new2" / "x" / "y";
  std::string folders = " ";
  if (!attn_test::contains(args, "--out")) folders += "--out '" + out.string() + "' ";
  if (!attn_test::contains(args, "--dump")) folders += "--dump '" + dump.string() + "' ";
  std::set<std::string> before = entries_below(dir);
  const attn_test::Output r = attn_test::run_chapter(chapter, folders + in_dir(args, dir), dir);
  const std::string what = chapter + " " + args.substr(0, 200);
  EXPECT_EQ(r.code, 2) << what << "\nstdout: " << r.out.substr(0, 300)
                       << "\nstderr: " << r.err.substr(0, 2000);
  EXPECT_EQ(r.err.rfind(chapter + ": ", 0), 0u) << what << ": the message starts with the program";
  EXPECT_TRUE(attn_test::contains(r.err, mentions)) << what << ": the message names the problem\n"
                                                    << r.err.substr(0, 2000);
  EXPECT_TRUE(attn_test::contains(r.err, "Usage:")) << what << ": the usage follows\n"
                                                    << r.err.substr(0, 2000);
  EXPECT_EQ(r.out.substr(0, 300), "") << what << ": nothing may run before the options are checked";
  EXPECT_FALSE(fs::exists(dir / "new")) << what << ": made the --out folder or a parent of it";
  EXPECT_FALSE(fs::exists(dir / "new2")) << what << ": made the --dump folder or a parent of it";
  before.insert({(dir / "stdout.txt").string(), (dir / "stderr.txt").string()});
  std::vector<std::string> written;
  for (const std::string& e : entries_below(dir)) {
    if (before.count(e) == 0) written.push_back(e);
  }
  EXPECT_TRUE(written.empty()) << what << ": wrote " << written.size() << " files or folders, e.g. "
                               << (written.empty() ? "" : written.front());
  fs::remove_all(dir);
  return r;
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

TEST(BadInput, AGoodOutIsNotMadeWhenDumpIsBad) {
  // --out is checked (and made) before --dump: a --dump that fails must take it back.
  for (const char* chapter : kChapters) {
    expect_usage_error(chapter, "--dump '{dir}/a_file/sub'", "--dump: cannot create folder",
                       [](const fs::path& dir) { std::ofstream(dir / "a_file") << "a file"; });
  }
}

TEST(BadInput, DanglingSymlinkAsAFolder) {
  // `ln -s /nonexistent/x L; --out L` said "File exists": name the link and its missing target.
  const auto link = [](const fs::path& dir) {
    fs::create_symlink(dir / "nowhere" / "x", dir / "L");
  };
  for (const char* chapter : kChapters) {
    for (const std::string option : {"--out", "--dump"}) {
      const std::string other = option == "--dump" ? " --no-plots" : "";
      const attn_test::Output r =
          expect_usage_error(chapter, option + " '{dir}/L'" + other, option + ": ", link);
      EXPECT_TRUE(attn_test::contains(r.err, "/L is a symbolic link to ")) << r.err;
      EXPECT_TRUE(attn_test::contains(r.err, "nowhere/x, which does not exist")) << r.err;
    }
  }
  const attn_test::Output r =
      expect_usage_error("04_softmax_scaling", "--out '{dir}/L/sub'", "which does not exist", link);
  EXPECT_TRUE(attn_test::contains(r.err, "nowhere/x, which does not exist")) << r.err;
}

TEST(BadInput, HelpWorksWhereTheDefaultPlotsFolderCannotBeWritten) {
  // A chapter outside a checkout draws into ./plots by default; here that is a file. The usage
  // must still print: a default nobody typed is no usage error. (Run, it is one.)
  const fs::path dir = attn_test::scratch("bad_input", "help_default_out");
  fs::copy_file(fs::path(ATTN_BIN_DIR) / "04_softmax_scaling", dir / "04_softmax_scaling");
  std::ofstream(dir / "plots") << "a file";
  const std::string cd = "cd '" + dir.string() + "' && ./04_softmax_scaling ";
  const auto exit_code = [](int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; };
  for (const std::string help : {"--help", "-h"}) {
    const int code = exit_code(std::system((cd + help + " >help.txt 2>&1").c_str()));
    const std::string text = attn_test::read_file(dir / "help.txt");
    EXPECT_EQ(code, 0) << help << "\n" << text;
    EXPECT_TRUE(attn_test::contains(text, "Usage:")) << help;
  }
  const int code = exit_code(std::system((cd + ">run.txt 2>&1").c_str()));
  const std::string text = attn_test::read_file(dir / "run.txt");
  EXPECT_EQ(code, 2) << text;
  EXPECT_TRUE(attn_test::contains(text, "--out: ")) << text;
  fs::remove_all(dir);
}

TEST(BadInput, HugeValuesAreNotEchoedWhole) {
  // A 130,000-character value was echoed whole: the message is cut, and says by how much.
  // (One shell word of the command must stay under Linux's 128 KiB per argument.)
  const std::string digits(125000, '6'), letters(125000, 'x');
  const std::pair<const char*, std::string> runs[] = {
      {"04_softmax_scaling", "--d-k " + digits},
      {"05_masking", "--mask " + letters},
      {"01_rnn", "--no-such-" + letters},
      {"08_transformer_block", "--no-plots --dump '{dir}/" + letters + "'"},
  };
  for (const auto& [chapter, args] : runs) {
    const attn_test::Output r = expect_usage_error(chapter, args, "characters left out");
    EXPECT_LT(r.err.size(), 4096u) << chapter << ": stderr holds " << r.err.size() << " bytes";
  }
}

TEST(BadInput, NumbersTooSmallForTheirTypeAreReadAsTheNearestOne) {
  // "--row 1e-40,0": 1e-40 is a number in [-1000, 1000], below float's normal range; it is read
  // as the nearest double and then float, the subnormal 9.99995e-41, as np.float32(1e-40) is,
  // and the manifest records the value read. 1e-400 is read as 0, as Python's float() reads it.
  const fs::path dir = attn_test::scratch("bad_input", "tiny");
  const attn_test::Output r = attn_test::run_chapter(
      "10_efficient_attention",
      "--no-plots --split 1 --row 1e-40,1e-400 --dump '" + (dir / "d").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string manifest = attn_test::read_file(dir / "d" / "manifest.json");
  EXPECT_TRUE(attn_test::contains(manifest, "1e-40,0")) << manifest;
  fs::remove_all(dir);
}

TEST(BadInput, LeadingZerosAreDecimal) {
  // CLI11 reads a leading 0 as octal: --d-k 064 ran with d_k = 52, --d-model 0100 with 64.
  // A zero in front changes nothing now: the same output as without it.
  const std::pair<const char*, std::string> knobs[] = {
      {"04_softmax_scaling", "--d-k 64"},
      {"03_vectorized_qkv", "--d-model 100"},
      {"08_transformer_block", "--d-ff 32"},
  };
  const fs::path dir = attn_test::scratch("bad_input", "leading_zeros");
  for (const auto& [chapter, args] : knobs) {
    std::string padded = args;
    padded.insert(padded.rfind(' ') + 1, "0");  // "--d-k 064"
    const attn_test::Output plain = attn_test::run_chapter(chapter, "--no-plots " + args, dir);
    const attn_test::Output zero = attn_test::run_chapter(chapter, "--no-plots " + padded, dir);
    ASSERT_EQ(plain.code, 0) << chapter << " " << args << "\n" << plain.err;
    EXPECT_EQ(zero.code, 0) << chapter << " " << padded << "\n" << zero.err;
    EXPECT_GT(plain.out.size(), 1000u) << chapter << " " << args;
    EXPECT_TRUE(zero.out == plain.out)
        << chapter << " " << padded << " prints other numbers than " << args << "\n"
        << zero.out.substr(0, 200);
  }
  fs::remove_all(dir);
}

}  // namespace test_bad_input
