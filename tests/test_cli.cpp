// course::ChapterCli: the options every chapter shares, and exit code 2 for every bad input.
#include "course/cli.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Runs parse() on a command line given as words; captures what it prints.
struct Parsed {
  std::optional<int> exit_code;
  std::string out, err;
};

Parsed parse(course::ChapterCli& cli, std::initializer_list<std::string> words) {
  std::vector<std::string> storage = {"01_test"};
  storage.insert(storage.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& w : storage) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Parsed p;
  p.exit_code = cli.parse(static_cast<int>(storage.size()), argv.data());
  p.out = ::testing::internal::GetCapturedStdout();
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("attn_cli_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string in_dir(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(CliTest, DefaultsRunTheChapter) {
  course::ChapterCli cli("01_test", "A test chapter.", 1234);
  const Parsed p = parse(cli, {"--out", in_dir("plots")});
  EXPECT_FALSE(p.exit_code.has_value());
  EXPECT_EQ(cli.options().seed, 1234u);
  EXPECT_FALSE(cli.options().no_plots);
  EXPECT_TRUE(cli.options().dump_dir.empty());
  EXPECT_TRUE(cli.plotter().enabled());
  EXPECT_FALSE(cli.dumper().enabled());
  EXPECT_TRUE(fs::is_directory(dir_ / "plots")) << "--out is created up front";
  EXPECT_TRUE(fs::is_empty(dir_ / "plots")) << "the write probe is cleaned up";
}

TEST_F(CliTest, HelpPrintsUsageToStdoutAndExitsZero) {
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--help"});
  EXPECT_EQ(p.exit_code, 0);
  for (const char* option : {"--seed", "--out", "--no-plots", "--dump", "A test chapter."}) {
    EXPECT_NE(p.out.find(option), std::string::npos) << option;
  }
  EXPECT_EQ(p.err, "");
}

TEST_F(CliTest, EveryOptionIsRead) {
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  int hidden = 4;
  cli.app().add_option("--hidden", hidden)->check(CLI::Range(1, 64));
  const Parsed p = parse(cli, {"--seed", "99", "--no-plots", "--dump", in_dir("dump"), "--hidden", "16"});
  ASSERT_FALSE(p.exit_code.has_value()) << p.err;
  EXPECT_EQ(cli.options().seed, 99u);
  EXPECT_TRUE(cli.options().no_plots);
  EXPECT_FALSE(cli.plotter().enabled());
  EXPECT_TRUE(cli.dumper().enabled());
  EXPECT_TRUE(fs::is_directory(dir_ / "dump"));
  EXPECT_EQ(hidden, 16);
}

TEST_F(CliTest, BadInputExitsTwoWithTheProblemAndTheUsage) {
  fs::path a_file = dir_ / "a_file";
  std::ofstream(a_file) << "not a folder";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--no-such-option"}, "no-such-option"},
      {{"--seed", "banana"}, "seed"},
      {{"--seed", "-1"}, "seed"},
      {{"--seed"}, "seed"},
      {{"--hidden", "0"}, "hidden"},
      {{"--hidden", "65"}, "hidden"},
      {{"--out", (a_file / "sub").string()}, "--out"},
      {{"--dump", a_file.string()}, "--dump"},
      {{"positional"}, "positional"},
  };
  for (const auto& [words, mention] : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    int hidden = 4;
    cli.app().add_option("--hidden", hidden)->check(CLI::Range(1, 64));
    std::vector<std::string> storage = {"01_test", "--out", in_dir("plots")};
    storage.insert(storage.end(), words.begin(), words.end());
    std::vector<char*> argv;
    for (auto& w : storage) argv.push_back(w.data());
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const auto code = cli.parse(static_cast<int>(argv.size()), argv.data());
    const std::string out = ::testing::internal::GetCapturedStdout();
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 2) << words.front();
    EXPECT_NE(err.find(mention), std::string::npos) << "the message names the problem: " << err;
    EXPECT_NE(err.find("Usage:"), std::string::npos) << "the usage follows: " << err;
    EXPECT_EQ(err.rfind("01_test: ", 0), 0u) << "the message starts with the program name: " << err;
    EXPECT_EQ(out, "") << "errors go to stderr only";
  }
}

TEST_F(CliTest, NoPlotsSkipsTheOutFolderCheck) {
  fs::path a_file = dir_ / "a_file";
  std::ofstream(a_file) << "x";
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--no-plots", "--out", (a_file / "sub").string()});
  EXPECT_FALSE(p.exit_code.has_value()) << "nothing will be drawn, so --out does not matter";
}

}  // namespace

namespace {

TEST(Cli, FiniteRangeRejectsNaNAndOutOfRange) {
  const CLI::Validator v = course::finite_range(0.5, 2.0);
  for (std::string ok : {"0.5", "1", "2", "1e0"}) EXPECT_EQ(v(ok), "") << ok;
  for (std::string bad : {"nan", "-nan", "NaN", "inf", "0.49", "2.01", "x", ""}) {
    EXPECT_NE(v(bad), "") << bad;
  }
}

}  // namespace
