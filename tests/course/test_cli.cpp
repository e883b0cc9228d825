// course::ChapterCli: the options every chapter shares, and exit code 2 for every bad input.
#include "course/cli.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace test_cli {

// Runs parse() on a command line given as words; captures what it prints.
struct Parsed {
  std::optional<int> exit_code;
  std::string out, err;
};

Parsed parse(course::ChapterCli& cli, const std::vector<std::string>& words) {
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
           (std::string("attn_cli_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
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
  const Parsed p =
      parse(cli, {"--seed", "99", "--no-plots", "--dump", in_dir("dump"), "--hidden", "16"});
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
      {{"--dump", ""}, "--dump: the folder name is empty"},
      {{"--out", ""}, "--out: the folder name is empty"},
      {{"positional"}, "positional"},
  };
  for (const auto& [words, mention] : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    int hidden = 4;
    cli.app().add_option("--hidden", hidden)->check(CLI::Range(1, 64));
    std::vector<std::string> line = {"--out", in_dir("plots")};
    line.insert(line.end(), words.begin(), words.end());
    const auto [code, out, err] = parse(cli, line);
    EXPECT_EQ(code, 2) << words.front();
    EXPECT_NE(err.find(mention), std::string::npos) << "the message names the problem: " << err;
    EXPECT_NE(err.find("Usage:"), std::string::npos) << "the usage follows: " << err;
    EXPECT_EQ(err.rfind("01_test: ", 0), 0u) << "the message starts with the program name: " << err;
    EXPECT_EQ(out, "") << "errors go to stderr only";
  }
}

TEST_F(CliTest, ShortHelpToo) {
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"-h"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("Usage:"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("-h,--help"), std::string::npos) << p.out;
  EXPECT_EQ(p.err, "");
}

TEST_F(CliTest, AUsageErrorWinsOverHelp) {
  // CLI11's help flag threw as soon as it was read, so "--no-such --help" printed the usage
  // and exited 0: a wrong command line must be reported as wrong, --help or not.
  std::ofstream(dir_ / "a_file") << "x";
  const std::string below_a_file = in_dir("a_file/sub");
  const std::vector<std::vector<std::string>> cases = {
      {"--no-such", "--help"},
      {"--help", "--no-such"},
      {"-h", "positional"},
      {"--help", "--dump", ""},
      {"--help", "--dump", below_a_file},
      {"--hidden", "3", "--help"},  // the rule: even only
      {"--help", "--dump", in_dir("new2/x"), "--out", below_a_file},
  };
  for (const auto& words : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    std::ptrdiff_t hidden = 4;
    cli.option("--hidden", hidden, "H")->check(CLI::Range(1, 64));
    cli.add_rule([&] { return hidden % 2 == 0 ? std::string() : std::string("H must be even"); });
    std::vector<std::string> line = {"--out", in_dir("new/plots")};
    line.insert(line.end(), words.begin(), words.end());
    const auto [code, out, err] = parse(cli, line);
    EXPECT_EQ(code, 2) << words.front() << " " << words.back() << "\n" << err;
    EXPECT_EQ(out, "") << "the usage goes to stderr, after the problem";
    EXPECT_FALSE(fs::exists(dir_ / "new")) << words.front() << " " << words.back();
    EXPECT_FALSE(fs::exists(dir_ / "new2")) << words.front() << " " << words.back();
  }
  // --help alone still prints the usage, exit 0, and creates no folder: --out and --dump are
  // checked (a bad one is an error) and then taken back.
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p =
      parse(cli, {"--out", in_dir("new/plots"), "--dump", in_dir("new2/x/y"), "--help"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("Usage:"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "new"));
  EXPECT_FALSE(fs::exists(dir_ / "new2"));
}

TEST_F(CliTest, IntegerKnobsAreDecimal) {
  // CLI11 reads integers with strtoll(text, 0): "064" was octal 52, "0100" 64, "0x10" 16.
  const std::vector<std::pair<std::string, std::ptrdiff_t>> cases = {
      {"64", 64}, {"064", 64}, {"0100", 100}, {"000", 0}, {"+5", 5}, {"-0", 0}, {"09", 9}};
  for (const auto& [text, value] : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    std::ptrdiff_t d_k = 4;  // attn::Index, as the chapters declare their knobs
    cli.option("--d-k", d_k, "width")->check(CLI::Range(0, 16384));
    const Parsed p = parse(cli, {"--no-plots", "--d-k", text});
    ASSERT_FALSE(p.exit_code.has_value()) << text << "\n" << p.err;
    EXPECT_EQ(d_k, value) << text;
  }
  // A list of integers, element by element.
  course::ChapterCli list_cli("01_test", "A test chapter.", 1);
  std::vector<int> sizes;
  list_cli.option("--sizes", sizes, "sizes")->delimiter(',');
  const Parsed lp = parse(list_cli, {"--no-plots", "--sizes", "08,010,+3"});
  ASSERT_FALSE(lp.exit_code.has_value()) << lp.err;
  EXPECT_EQ(sizes, (std::vector<int>{8, 10, 3}));
}

TEST_F(CliTest, TheSeedIsDecimal) {
  const std::vector<std::pair<std::string, std::uint64_t>> cases = {
      {"010", 10}, {"+7", 7}, {"-0", 0}, {"018446744073709551615", 18446744073709551615u}};
  for (const auto& [text, value] : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    const Parsed p = parse(cli, {"--no-plots", "--seed", text});
    ASSERT_FALSE(p.exit_code.has_value()) << text << "\n" << p.err;
    EXPECT_EQ(cli.options().seed, value) << text;
  }
}

TEST_F(CliTest, IntegerKnobsRefuseWhatIsNotAWholeDecimalNumber) {
  // Each is refused with the option's name and "not a whole number", not "not in range".
  for (const std::string bad : {"64.0", "64.", "1e3", "0x10", "0X10", "0b1", "010.5", " 7", "7 ",
                                "", "+", "1,000", "six"}) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    std::ptrdiff_t d_k = 4;
    cli.option("--d-k", d_k, "width")->check(CLI::Range(1, 16384));
    const Parsed p = parse(cli, {"--no-plots", "--d-k", bad});
    EXPECT_EQ(p.exit_code, 2) << "'" << bad << "'";
    EXPECT_NE(p.err.find("--d-k: '" + bad + "' is not a whole number"), std::string::npos) << p.err;
  }
  // The hint, when the text is a number that is whole.
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  std::ptrdiff_t d_k = 4;
  cli.option("--d-k", d_k, "width")->check(CLI::Range(1, 16384));
  EXPECT_NE(parse(cli, {"--no-plots", "--d-k", "64.0"}).err.find("(did you mean 64?)"),
            std::string::npos);
}

TEST_F(CliTest, IntegersBeyondTheKnobsTypeAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"2147483648", "'2147483648' is too large (the largest is 2147483647)"},
      {"-2147483649", "'-2147483649' is too small (the smallest is -2147483648)"},
      {"99999999999999999999999",
       "'99999999999999999999999' is too large (the largest is 2147483647)"}};
  for (const auto& [text, says] : cases) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    int count = 4;
    cli.option("--count", count, "count");
    const Parsed p = parse(cli, {"--no-plots", "--count", text});
    EXPECT_EQ(p.exit_code, 2) << text;
    EXPECT_NE(p.err.find("--count: " + says), std::string::npos) << p.err;
  }
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--no-plots", "--seed", "-1"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--seed: '-1' is too small (the smallest is 0)"), std::string::npos)
      << p.err;
}

TEST_F(CliTest, LongMessagesAreCutOnCharacterBoundaries) {
  // A 100,000-character value was echoed whole. Two-byte characters: the cut must not split one.
  std::string value;
  for (int i = 0; i < 50000; ++i) value += "\xc3\xa9";  // e acute in UTF-8
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--no-plots", "--seed", value});
  EXPECT_EQ(p.exit_code, 2);
  const std::string first_line = p.err.substr(0, p.err.find('\n'));
  EXPECT_LT(first_line.size(), 500u);
  EXPECT_NE(first_line.find("characters left out"), std::string::npos) << first_line;
  EXPECT_EQ(first_line.rfind("01_test: --seed: '", 0), 0u) << "the start is kept: " << first_line;
  EXPECT_NE(first_line.find("' is not a whole number in decimal digits"), std::string::npos)
      << "the end is kept: " << first_line;
  // Well-formed UTF-8: every 0xC3 is followed by its continuation byte, and no stray one.
  for (std::size_t i = 0; i < first_line.size(); ++i) {
    const auto byte = static_cast<unsigned char>(first_line[i]);
    if (byte == 0xC3) {
      ASSERT_LT(i + 1, first_line.size());
      EXPECT_EQ(static_cast<unsigned char>(first_line[++i]), 0xA9) << "at " << i;
    } else {
      EXPECT_LT(byte, 0x80) << "a split character at " << i;
    }
  }
}

TEST_F(CliTest, AFailedDumpTakesBackTheOutFolder) {
  // --out is made before --dump is checked; a --dump that cannot be made must leave no --out.
  std::ofstream(dir_ / "a_file") << "x";
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--out", in_dir("new/a/plots"), "--dump", in_dir("a_file/sub")});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--dump: cannot create folder"), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(dir_ / "new")) << "the --out folder and its new parents are removed";
  // Folders that were there before are left alone, made or not.
  fs::create_directories(dir_ / "old");
  course::ChapterCli again("01_test", "A test chapter.", 1);
  const Parsed q = parse(again, {"--out", in_dir("old/plots"), "--dump", in_dir("a_file/sub")});
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_TRUE(fs::is_directory(dir_ / "old"));
  EXPECT_FALSE(fs::exists(dir_ / "old" / "plots"));
}

TEST_F(CliTest, ADanglingSymlinkIsNamed) {
  // create_directories() said "File exists" for a link to nowhere.
  fs::create_symlink("/nonexistent/x", dir_ / "L");
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--out", in_dir("L")});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("--out: " + in_dir("L") +
                       " is a symbolic link to /nonexistent/x, which does not exist"),
            std::string::npos)
      << p.err;
}

TEST_F(CliTest, NoPlotsSkipsTheOutFolderCheck) {
  fs::path a_file = dir_ / "a_file";
  std::ofstream(a_file) << "x";
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  const Parsed p = parse(cli, {"--no-plots", "--out", (a_file / "sub").string()});
  EXPECT_FALSE(p.exit_code.has_value()) << "nothing will be drawn, so --out does not matter";
}

}  // namespace test_cli

namespace test_cli {

TEST(Cli, FiniteRangeRejectsNaNAndOutOfRange) {
  const CLI::Validator v = course::finite_range(0.5, 2.0);
  for (std::string ok : {"0.5", "1", "2", "1e0"}) EXPECT_EQ(v(ok), "") << ok;
  for (std::string bad : {"nan", "-nan", "NaN", "inf", "0.49", "2.01", "x", ""}) {
    EXPECT_NE(v(bad), "") << bad;
  }
}

}  // namespace test_cli

namespace test_cli {

TEST(CliHelp, DescriptionsWrapUnderThemselvesWithin100Columns) {
  // CLI11 printed a description on one line after the option's name, however long.
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  int width = 4;
  cli.option("--width", width,
             "a description long enough to need two lines at one hundred columns, because it "
             "goes on and on about what the width is and why it matters [1 - 64] here");
  cli.app().footer(std::string(30, 'x') + " " + std::string(60, 'y') + " " + std::string(20, 'z'));
  const Parsed p = parse(cli, {"--help"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string indent(30, ' ');  // CLI11's description column
  EXPECT_NE(
      p.out.find("  --width INT=4               "
                 "a description long enough to need two lines at one hundred columns,\n" +
                 indent + "because it goes on and on about what the width is and why it matters\n" +
                 indent + "[1 - 64] here\n"),
      std::string::npos)
      << p.out;
  EXPECT_NE(p.out.find("\n" + std::string(30, 'x') + " " + std::string(60, 'y') + "\n" +
                       std::string(20, 'z') + "\n"),
            std::string::npos)
      << p.out;
}

}  // namespace test_cli

namespace test_cli {

// The first line of what parse() wrote to stderr for `words`, with an --out that can be written,
// in a chapter with the knobs --d-model, --d-k, --d-v and --heads.
Parsed parse_with_knobs(const std::vector<std::string>& words) {
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  int d_model = 8, d_k = 4, d_v = 4, heads = 2;
  cli.option("--d-model", d_model, "d_model");
  cli.option("--d-k", d_k, "d_k");
  cli.option("--d-v", d_v, "d_v");
  cli.option("--heads", heads, "heads");
  std::vector<std::string> line = {"--no-plots"};
  line.insert(line.end(), words.begin(), words.end());
  return parse(cli, line);
}

TEST(CliUnknownOption, NamesTheNearestKnownOption) {
  // CLI11 said "The following arguments were not expected: 16 --d-modle".
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--d-modle", "16"}, "unknown option --d-modle; did you mean --d-model?"},
      {{"--d-modle=16"}, "unknown option --d-modle; did you mean --d-model?"},
      {{"--sed", "5"}, "unknown option --sed; did you mean --seed?"},
      {{"--Heads", "2"}, "unknown option --Heads; did you mean --heads?"},
      {{"-seed", "5"}, "unknown option -seed; did you mean --seed?"},
      {{"--no-plot"}, "unknown option --no-plot; did you mean --no-plots?"},
      // Equally near: both are named.
      {{"--d-q", "4"}, "unknown option --d-q; did you mean --d-k or --d-v?"},
      // Far from every option: no guess.
      {{"--no-such-option"}, "unknown option --no-such-option"},
      {{"--x", "1"}, "unknown option --x"},
      // One edit past the limit (one in 4 letters, two in 5 to 8): no guess.
      {{"--sxxd", "5"}, "unknown option --sxxd"},
      {{"--bogus"}, "unknown option --bogus"},
      {{"--hedas", "2", "--colour"},
       "unknown option --hedas; did you mean --heads? (also unknown: --colour)"},
      // A stray value, with no option before it.
      {{"positional"},
       "unexpected argument 'positional': a value goes after its option, as in --seed 7"},
      {{"--heads", "2", "4", "-5"},
       "unexpected arguments '4', '-5': a value goes after its option, as in --seed 7"},
  };
  for (const auto& [words, says] : cases) {
    const Parsed p = parse_with_knobs(words);
    EXPECT_EQ(p.exit_code, 2) << words.front();
    const std::string first_line = p.err.substr(0, p.err.find('\n'));
    EXPECT_EQ(first_line, "01_test: " + says);
    EXPECT_NE(p.err.find("Usage:"), std::string::npos) << "the usage follows: " << p.err;
    EXPECT_EQ(p.out, "");
  }
}

}  // namespace test_cli

namespace test_cli {

TEST(CliNumbers, FloatingPointKnobsAreReadAsWrittenInDecimal) {
  // CLI11 read "0x10" as 16, "0x1p3" as 8 and " 1" as 1 (strtold), and rounded twice.
  const std::vector<std::pair<std::string, double>> good = {
      {"0.5", 0.5},
      {"+3", 3.0},
      {"1e-40", 1e-40},
      {"1e-400", 0.0},
      {"1.000000000000000111022302462515654042363166809082031251", std::nextafter(1.0, 2.0)}};
  for (const auto& [text, value] : good) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    double x = 7.0;
    cli.option("--x", x, "x");
    const Parsed p = parse(cli, {"--no-plots", "--x", text});
    ASSERT_FALSE(p.exit_code.has_value()) << text << "\n" << p.err;
    EXPECT_EQ(x, value) << text;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"0x10", "--x: '0x10' is not a number in decimal digits (did you mean 16?)"},
      {"0x1p3", "--x: '0x1p3' is not a number in decimal digits (did you mean 8?)"},
      {" 1", "--x: ' 1' is not a number in decimal digits (did you mean 1?)"},
      {"inf", "--x: 'inf' is not a finite number"},
      {"nan", "--x: 'nan' is not a finite number"},
      {"1e999", "--x: '1e999' is too large"}};
  for (const auto& [text, says] : bad) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    double x = 7.0;
    cli.option("--x", x, "x");
    const Parsed p = parse(cli, {"--no-plots", "--x", text});
    EXPECT_EQ(p.exit_code, 2) << text;
    EXPECT_NE(p.err.find(says), std::string::npos) << p.err;
  }
}

TEST(CliNumbers, ListEntriesAreNumbersAndNoneIsEmpty) {
  // CLI11 splits at the delimiter and drops empty pieces: "1,2," ran as {1, 2}.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--row", "1,2,"}, "--row: entry 3 of '1,2,' is empty"},
      {{"--row=1,,2"}, "--row: entry 2 of '1,,2' is empty"},
      {{"--row", ",1"}, "--row: entry 1 of ',1' is empty"},
      {{"--row", "1,2", "3,"}, "--row: entry 2 of '3,' is empty"},
      {{"--row", "0x10,1"}, "--row: '0x10' is not a number in decimal digits (did you mean 16?)"},
      {{"--row", "1,inf"}, "--row: 'inf' is not a finite number"},
  };
  for (const auto& [words, says] : bad) {
    course::ChapterCli cli("01_test", "A test chapter.", 1);
    std::vector<double> row;
    cli.option("--row", row, "row")->delimiter(',')->expected(1, 16);
    std::vector<std::string> line = {"--no-plots"};
    line.insert(line.end(), words.begin(), words.end());
    const Parsed p = parse(cli, line);
    EXPECT_EQ(p.exit_code, 2) << words.back();
    EXPECT_EQ(p.err.substr(0, p.err.find('\n')), "01_test: " + says);
  }
  course::ChapterCli cli("01_test", "A test chapter.", 1);
  std::vector<double> row;
  cli.option("--row", row, "row")->delimiter(',')->expected(1, 16);
  const Parsed p = parse(cli, {"--no-plots", "--row", "1e-40,-2,+.5"});
  ASSERT_FALSE(p.exit_code.has_value()) << p.err;
  EXPECT_EQ(row, (std::vector<double>{1e-40, -2.0, 0.5}));
}

TEST(CliNumbers, FiniteRangeReadsDecimalOnly) {
  // It read the text with CLI11's strtold: "0x1p0" and " 1" were 1, within [0.5, 2].
  const CLI::Validator v = course::finite_range(0.5, 2.0);
  for (std::string bad : {"0x1p0", " 1", "+inf", "1e400"}) EXPECT_NE(v(bad), "") << bad;
  for (std::string ok : {"+1", "1.", "5e-1"}) EXPECT_EQ(v(ok), "") << ok;
}

}  // namespace test_cli
