// Chapter 12's corpus (chapters/12_language_model/corpus.hpp): the King James Bible read from
// Debian's bible program, checked against its size and checksum (measured apart from this code,
// in Python), its vocabulary, the 90/10 split and random training windows; the program missing
// from PATH, failing, or printing another text, with stand-ins for it; a learner's own text
// file; the vocabulary's, split's and windows' rules and errors on small inputs worked by hand.
#include "attn/core/random.hpp"
#include "chapter_run.hpp"
#include "corpus.hpp"
#include "expect.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_12_corpus {

namespace fs = std::filesystem;
using attn::Index;
using attn_test::message_of;

// What `f()` throws as std::runtime_error (read_kjv's and read_text_file's errors are about
// the machine and its files, not arguments), or "(no exception)".
template <typename F>
std::string runtime_error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string("(std::invalid_argument) ") + e.what();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no exception)";
}

// PATH set to `value` (unset for std::nullopt) for the guard's lifetime, then put back, also
// when an assertion ends the test early.
class PathSetTo {
 public:
  explicit PathSetTo(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("PATH")) saved_ = old;
    if (value) {
      ::setenv("PATH", value->c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  ~PathSetTo() {
    if (saved_) {
      ::setenv("PATH", saved_->c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  PathSetTo(const PathSetTo&) = delete;
  PathSetTo& operator=(const PathSetTo&) = delete;

 private:
  std::optional<std::string> saved_;
};

// A stand-in for `bible`: a shell script of that name in `dir`, running `body` (builtins only:
// its PATH is `dir` alone).
void write_fake_bible(const fs::path& dir, const std::string& body) {
  const fs::path script = dir / "bible";
  std::ofstream(script) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(script, fs::perms::owner_all);
}

constexpr const char* kNoBible =
    "/usr/bin/bible is missing: Debian's package bible-kjv is not installed "
    "(bash scripts/setup.sh installs it)";

// The Bible read once per test process (each test is its own process under ctest).
const std::string& kjv() {
  static const std::string text = corpus::read_kjv();
  return text;
}

// The lines of `text`, each without its '\n'.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t from = 0; from < text.size();) {
    const std::size_t end = text.find('\n', from);
    lines.push_back(text.substr(from, end - from));
    if (end == std::string::npos) break;
    from = end + 1;
  }
  return lines;
}

TEST(Fnv1a64, MatchesThePublishedTestVectors) {
  // From the FNV authors' test suite (isthe.com/chongo/tech/comp/fnv): the offset basis for
  // the empty string, then "a" and "foobar".
  EXPECT_EQ(attn::fnv1a64(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(attn::fnv1a64("a"), 0xAF63DC4C8601EC8CULL);
  EXPECT_EQ(attn::fnv1a64("foobar"), 0x85944171F73967E8ULL);
  // Bytes, not chars: a byte above 0x7F counts as its unsigned value.
  EXPECT_NE(attn::fnv1a64("\xC3\xA9"), attn::fnv1a64("\x43\x29"));
}

TEST(KjvCorpus, IsTheWholeBibleOneVersePerLineWithoutReferences) {
  if (!fs::exists("/usr/bin/bible")) GTEST_SKIP() << kNoBible;
  const std::string& text = kjv();
  // The constants, measured in Python from the program's output (corpus.hpp), and what
  // read_kjv() checked them against, again here.
  EXPECT_EQ(text.size(), corpus::kKjvBytes);
  EXPECT_EQ(attn::fnv1a64(text), corpus::kKjvChecksum);
  const std::vector<std::string> lines = lines_of(text);
  ASSERT_EQ(lines.size(), corpus::kKjvVerses);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(lines.front(), "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(lines[1].substr(0, 40), "And the earth was without form, and void");
  EXPECT_EQ(lines.back(), "The grace of our Lord Jesus Christ be with you all. Amen.");
  // John 11:35, the 26,559th verse, found where the program's order puts it.
  EXPECT_EQ(lines[26'558], "Jesus wept.");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    ASSERT_FALSE(line.empty()) << "verse " << i + 1;
    // No reference left: a verse starts with a letter or an opening parenthesis, not with a
    // book's digit ("1Co13:4") or a space, and the King James text spells its numbers out, so
    // a digit anywhere would be a reference ("Ge1:1") left behind.
    ASSERT_TRUE(std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '(')
        << "verse " << i + 1 << ": " << line;
    ASSERT_EQ(line.find_first_of("0123456789"), std::string::npos)
        << "verse " << i + 1 << ": " << line;
  }
  EXPECT_TRUE(std::all_of(text.begin(), text.end(),
                          [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
}

TEST(KjvCorpus, HasAVocabularyOfSixtyThreeCharacters) {
  if (!fs::exists("/usr/bin/bible")) GTEST_SKIP() << kNoBible;
  const std::string& text = kjv();
  const corpus::CharVocab vocab = corpus::make_char_vocab(text);
  std::string shown = vocab.chars;  // the newline as \n, so the list stays on one line
  shown.replace(shown.find('\n'), 1, "\\n");
  std::printf("the King James Bible: %zu characters, a vocabulary of %d: \"%s\"\n", text.size(),
              vocab.size(), shown.c_str());
  EXPECT_GE(vocab.size(), 60);
  EXPECT_LE(vocab.size(), 80);
  // The text is pinned by its checksum, so its characters are too: newline, space, 10 marks,
  // 25 capitals (no X) and 26 small letters, in byte order.
  EXPECT_EQ(vocab.chars, "\n !'(),-.:;?ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz");
  EXPECT_NE(vocab.id_of['\n'], -1);
  EXPECT_NE(vocab.id_of[' '], -1);
  EXPECT_EQ(vocab.id_of['X'], -1);
  EXPECT_EQ(vocab.counts[static_cast<std::size_t>(vocab.id_of['\n'])],
            static_cast<std::int64_t>(corpus::kKjvVerses));
  EXPECT_EQ(vocab.counts[static_cast<std::size_t>(vocab.id_of['Q'])], 5);  // the rarest
  EXPECT_EQ(std::accumulate(vocab.counts.begin(), vocab.counts.end(), std::int64_t{0}),
            static_cast<std::int64_t>(text.size()));

  const std::vector<int> ids = corpus::encode(vocab, text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(corpus::decode(vocab, ids), text);

  // nanoGPT's split: int(n * 0.9) = 3,724,065 tokens to train on, 413,785 to validate.
  const corpus::Split split = corpus::split_tokens(ids, 0.1);
  EXPECT_EQ(split.train.size(), 3'724'065u);
  EXPECT_EQ(split.validation.size(), 413'785u);
  EXPECT_TRUE(std::equal(split.train.begin(), split.train.end(), ids.begin()));
  EXPECT_TRUE(std::equal(split.validation.begin(), split.validation.end(),
                         ids.end() - static_cast<std::ptrdiff_t>(split.validation.size())));
  EXPECT_NO_THROW(corpus::check_long_enough(split.validation.size(), 256, "the validation split"));
}

TEST(KjvCorpus, IsFoundWhenPathIsUnsetAsExecvpWould) {
  if (!fs::exists("/usr/bin/bible")) GTEST_SKIP() << kNoBible;
  // No PATH at all: searched in confstr(_CS_PATH), "/bin:/usr/bin" with glibc.
  const PathSetTo unset(std::nullopt);
  EXPECT_EQ(corpus::read_kjv().size(), corpus::kKjvBytes);
}

TEST(KjvCorpus, SaysHowToInstallTheProgramWhenItIsNotOnPath) {
  const fs::path empty = attn_test::scratch("ch12", "empty_path");
  const fs::path decoys = attn_test::scratch("ch12", "decoys");
  // A folder called bible, and a file called bible that may not be run: neither is a program.
  fs::create_directory(decoys / "bible");
  fs::create_directory(decoys / "sub");
  std::ofstream(decoys / "sub" / "bible") << "#!/bin/sh\nexit 0\n";
  fs::permissions(decoys / "sub" / "bible", fs::perms::owner_read | fs::perms::owner_write);
  const std::string expected =
      "read_kjv: the program `bible` is not on PATH. The corpus is the King James Bible from "
      "Debian's package bible-kjv; install it with `bash scripts/setup.sh` (which the README's "
      "commands run) or `sudo apt-get install bible-kjv`";
  for (const std::string& path :
       {empty.string(), decoys.string() + ":" + (decoys / "sub").string()}) {
    const PathSetTo set(path);
    EXPECT_EQ(runtime_error_of([] { corpus::read_kjv(); }), expected) << "PATH=" << path;
  }
  // An empty PATH is the current folder alone (POSIX), here the empty one.
  const fs::path here = fs::current_path();
  fs::current_path(empty);
  {
    const PathSetTo set("");
    EXPECT_EQ(runtime_error_of([] { corpus::read_kjv(); }), expected) << "PATH=\"\"";
  }
  fs::current_path(here);
}

TEST(KjvCorpus, SaysWhatWentWrongWhenTheProgramFailsOrPrintsAnotherText) {
  const fs::path dir = attn_test::scratch("ch12", "fake_bible");
  const PathSetTo set(dir.string());
  const auto error_with = [&](const std::string& body) {
    write_fake_bible(dir, body);
    return runtime_error_of([] { corpus::read_kjv(); });
  };
  const std::string program = (dir / "bible").string();

  EXPECT_EQ(
      error_with("printf 'Ge1:1 In the beginning\\n'; exit 3"),
      "read_kjv: `bible -f Gen1:1-Rev22:21` (" + program + ") failed: it exited with status 3");
  EXPECT_EQ(error_with("kill -9 $$"), "read_kjv: `bible -f Gen1:1-Rev22:21` (" + program +
                                          ") failed: it was stopped by signal 9");
  EXPECT_EQ(error_with("exit 0"), "read_kjv: `bible -f Gen1:1-Rev22:21` printed nothing");
  // bible's answer to a reference it does not know, with exit status 0; a line without a
  // space; an empty line.
  EXPECT_EQ(error_with("printf \"Bad Book: 'foo1:1'\\n\""),
            "read_kjv: line 1 of `bible -f Gen1:1-Rev22:21` is not a reference and a verse: "
            "\"Bad Book: 'foo1:1'\"");
  EXPECT_EQ(error_with("printf 'Ge1:1 In the beginning\\nGe1:2\\n'"),
            "read_kjv: line 2 of `bible -f Gen1:1-Rev22:21` is not a reference and a verse: "
            "\"Ge1:2\"");
  EXPECT_EQ(error_with("printf 'Ge1:1 In the beginning\\n\\nGe1:2 And\\n'"),
            "read_kjv: line 2 of `bible -f Gen1:1-Rev22:21` is not a reference and a verse: "
            "\"\"");

  // Another text: "In the beginning.\nAmen.\n", 24 bytes, its checksum computed here.
  const std::string other = "In the beginning.\nAmen.\n";
  const std::string message = error_with("printf 'Ge1:1 In the beginning.\\nRe22:21 Amen.'");
  char checksum[24];
  std::snprintf(checksum, sizeof checksum, "0x%016llX",
                static_cast<unsigned long long>(attn::fnv1a64(other)));
  EXPECT_EQ(message,
            "read_kjv: `bible -f Gen1:1-Rev22:21` gave 2 verses, 24 bytes of text with FNV-1a "
            "checksum " +
                std::string(checksum) +
                ", where the course was measured on 31102 verses, 4137850 bytes with checksum "
                "0xCA234ACE6589DC01 (bible-kjv 4.38 and 4.39, Debian 12 and 13): the package's "
                "version differs (`dpkg -s "
                "bible-kjv` shows yours), or its output was cut short. The chapter's numbers were "
                "measured on that text; to train on this one anyway, save it to a file and pass "
                "it with --corpus FILE");
  // A longer text is not "cut short".
  const std::string longer = error_with(
      "i=0; while [ $i -lt 80000 ]; do echo 'Ge1:1 In the beginning God created the heaven and "
      "the earth.'; i=$((i+1)); done");
  EXPECT_NE(longer.find("gave 80000 verses, 4400000 bytes"), std::string::npos) << longer;
  EXPECT_NE(longer.find("version differs"), std::string::npos) << longer;
  EXPECT_EQ(longer.find("cut short"), std::string::npos) << longer;
}

TEST(CorpusTextFile, ReadsEveryByteAndRefusesMissingEmptyAndFolders) {
  const fs::path dir = attn_test::scratch("ch12", "text_file");
  const std::string bytes("line one\r\nline two\n\0\xFF tail", 26);
  std::ofstream(dir / "mine.txt", std::ios::binary) << bytes;
  EXPECT_EQ(corpus::read_text_file((dir / "mine.txt").string()), bytes);

  const std::string missing = (dir / "missing.txt").string();
  EXPECT_EQ(runtime_error_of([&] { corpus::read_text_file(missing); }),
            "read_text_file: " + missing + ": cannot read (No such file or directory)");
  std::ofstream(dir / "empty.txt").close();
  const std::string empty = (dir / "empty.txt").string();
  EXPECT_EQ(runtime_error_of([&] { corpus::read_text_file(empty); }),
            "read_text_file: " + empty + " is empty: a corpus needs text to learn from");
  EXPECT_EQ(runtime_error_of([&] { corpus::read_text_file(dir.string()); }),
            "read_text_file: " + dir.string() + ": not a regular file (a folder)");
  if (::geteuid() != 0) {  // root reads a file whatever its permissions say
    std::ofstream(dir / "secret.txt") << "x";
    fs::permissions(dir / "secret.txt", fs::perms::none);
    const std::string secret = (dir / "secret.txt").string();
    EXPECT_EQ(runtime_error_of([&] { corpus::read_text_file(secret); }),
              "read_text_file: " + secret + ": cannot read (Permission denied)");
  }
}

TEST(CharVocabulary, HoldsTheDistinctBytesInByteOrderWithTheirCounts) {
  const corpus::CharVocab v = corpus::make_char_vocab("hello world\n");
  EXPECT_EQ(v.chars, "\n dehlorw");
  EXPECT_EQ(v.size(), 9);
  EXPECT_EQ(v.id_of['\n'], 0);
  EXPECT_EQ(v.id_of[' '], 1);
  EXPECT_EQ(v.id_of['l'], 5);
  EXPECT_EQ(v.id_of['w'], 8);
  EXPECT_EQ(v.id_of['a'], -1);
  EXPECT_EQ(v.counts, (std::vector<std::int64_t>{1, 1, 1, 1, 1, 3, 2, 1, 1}));
  for (int id = 0; id < v.size(); ++id) {
    EXPECT_EQ(v.id_of[static_cast<unsigned char>(v.chars[static_cast<std::size_t>(id)])], id);
  }
  // Bytes above 0x7F sort after ASCII, as unsigned values.
  EXPECT_EQ(corpus::make_char_vocab("\xE9z\x01").chars, "\x01z\xE9");
  EXPECT_EQ(message_of([] { corpus::make_char_vocab(""); }),
            "make_char_vocab: the text is empty: a vocabulary needs at least one character");
}

TEST(CharVocabulary, EncodesAndDecodesAndNamesWhatItCannot) {
  const corpus::CharVocab v = corpus::make_char_vocab("hello world\n");
  const std::vector<int> ids = corpus::encode(v, "low\nhold");
  EXPECT_EQ(ids, (std::vector<int>{5, 6, 8, 0, 4, 6, 5, 2}));
  EXPECT_EQ(corpus::decode(v, ids), "low\nhold");
  EXPECT_EQ(corpus::encode(v, ""), std::vector<int>{});
  EXPECT_EQ(corpus::decode(v, std::vector<int>{}), "");

  EXPECT_EQ(message_of([&] { corpus::encode(v, "held"); }), "(no exception)");
  EXPECT_EQ(message_of([&] { corpus::encode(v, "hello, world"); }),
            "encode: the character ',' at offset 5 is not in the vocabulary of 9 characters");
  EXPECT_EQ(message_of([&] { corpus::encode(v, "old\twell"); }),
            "encode: the character \\x09 at offset 3 is not in the vocabulary of 9 characters");
  EXPECT_EQ(message_of([&] { corpus::encode(v, "r\xC3\xA9"); }),  // UTF-8 é: two bytes
            "encode: the character \\xC3 at offset 1 is not in the vocabulary of 9 characters");
  EXPECT_EQ(corpus::shown('a'), "'a'");
  EXPECT_EQ(corpus::shown(' '), "' '");
  EXPECT_EQ(corpus::shown('\n'), "\\x0A");
  EXPECT_EQ(corpus::shown('\x7F'), "\\x7F");
  EXPECT_EQ(corpus::shown('\xE9'), "\\xE9");
  EXPECT_EQ(message_of([&] {
              corpus::decode(v, std::vector<int>{0, 9});
            }),
            "decode: id 9 at position 1 is outside the vocabulary [0, 9)");
  EXPECT_EQ(message_of([&] { corpus::decode(v, std::vector<int>{-1}); }),
            "decode: id -1 at position 0 is outside the vocabulary [0, 9)");
}

TEST(TokenSplit, HoldsOutTheLastFractionInOrder) {
  std::vector<int> ids(100);
  std::iota(ids.begin(), ids.end(), 0);
  const corpus::Split s = corpus::split_tokens(ids, 0.1);
  ASSERT_EQ(s.train.size(), 90u);
  ASSERT_EQ(s.validation.size(), 10u);
  EXPECT_EQ(s.train.front(), 0);
  EXPECT_EQ(s.train.back(), 89);
  EXPECT_EQ(s.validation.front(), 90);
  EXPECT_EQ(s.validation.back(), 99);

  const auto sizes = [](std::size_t n, double f) {
    const corpus::Split split = corpus::split_tokens(std::vector<int>(n, 7), f);
    return std::vector<std::size_t>{split.train.size(), split.validation.size()};
  };
  EXPECT_EQ(sizes(10, 0.25), (std::vector<std::size_t>{7, 3}));  // floor(7.5) to train
  EXPECT_EQ(sizes(2, 0.01), (std::vector<std::size_t>{1, 1}));   // floor(1.98)
  EXPECT_EQ(sizes(2, 0.99), (std::vector<std::size_t>{1, 1}));   // floor(0.02), raised to 1
  EXPECT_EQ(sizes(1000, 0.999), (std::vector<std::size_t>{1, 999}));
  EXPECT_EQ(sizes(1000, 1e-9), (std::vector<std::size_t>{999, 1}));  // lowered to n - 1

  for (const double f : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", f);
    EXPECT_EQ(message_of([&] { corpus::split_tokens(ids, f); }),
              "split_tokens: the validation fraction is " + std::string(shown) +
                  ": it must be in (0, 1), so that both splits hold tokens");
  }
  EXPECT_EQ(message_of([] { corpus::split_tokens({3}, 0.5); }),
            "split_tokens: 1 tokens cannot be split: each split needs at least one");
}

TEST(TokenSplit, IsLongEnoughForAWindowAndTheTokenAfterIt) {
  EXPECT_NO_THROW(corpus::check_long_enough(257, 256, "the validation split"));
  EXPECT_EQ(message_of([] { corpus::check_long_enough(256, 256, "the validation split"); }),
            "check_long_enough: the validation split has 256 tokens, fewer than the 257 one "
            "window needs (a context of 256 tokens and the token that follows it)");
  EXPECT_EQ(message_of([] { corpus::check_long_enough(5, 64, "the training split"); }),
            "check_long_enough: the training split has 5 tokens, fewer than the 65 one window "
            "needs (a context of 64 tokens and the token that follows it)");
  EXPECT_EQ(message_of([] { corpus::check_long_enough(100, 0, "the training split"); }),
            "check_long_enough: the context is 0: it must be at least 1");
}

TEST(RandomWindows, TargetsAreTheInputsShiftedByOneAndEveryStartIsInRange) {
  // ids[i] = 3 i + 1: a window's first id tells its start, and every id tells its position.
  std::vector<int> ids(50);
  for (int i = 0; i < 50; ++i) ids[static_cast<std::size_t>(i)] = 3 * i + 1;
  const Index B = 16, n = 10;
  const std::size_t starts = ids.size() - n;  // 0 .. 39: the last window's target is ids[49]
  std::vector<int> times(starts, 0);
  attn::Rng rng(5);
  for (int round = 0; round < 2500; ++round) {  // 40,000 windows, 1,000 per start on average
    const attn::LanguageModelBatch batch = corpus::random_windows(ids, B, n, rng);
    ASSERT_EQ(batch.inputs.rows(), B);
    ASSERT_EQ(batch.inputs.cols(), n);
    ASSERT_EQ(batch.targets.rows(), B);
    ASSERT_EQ(batch.targets.cols(), n);
    for (Index b = 0; b < B; ++b) {
      const int start = (batch.inputs(b, 0) - 1) / 3;
      ASSERT_GE(start, 0);
      ASSERT_LT(static_cast<std::size_t>(start), starts);
      ++times[static_cast<std::size_t>(start)];
      for (Index i = 0; i < n; ++i) {
        ASSERT_EQ(batch.inputs(b, i), ids[static_cast<std::size_t>(start + i)]);
        ASSERT_EQ(batch.targets(b, i), ids[static_cast<std::size_t>(start + i + 1)]);
        if (i + 1 < n) {
          ASSERT_EQ(batch.targets(b, i), batch.inputs(b, i + 1));
        }
      }
    }
  }
  // Uniform over the 40 starts, the first and the last included: each count is binomial
  // (40,000, 1/40), standard deviation 31; 5 of them (as in test_sampling.cpp) is a band a
  // correct draw leaves with probability 5.7e-7 per start, and a fixed seed besides.
  const double mean = 40'000.0 / 40.0, sd = std::sqrt(40'000.0 * (1.0 / 40.0) * (39.0 / 40.0));
  for (std::size_t s = 0; s < starts; ++s) {
    EXPECT_NEAR(times[s], mean, 5.0 * sd) << "start " << s;
  }
}

TEST(RandomWindows, DrawOneUniformPerWindow) {
  std::vector<int> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  attn::Rng rng(6);
  attn::Rng copy = rng;
  const attn::LanguageModelBatch batch = corpus::random_windows(ids, 8, 20, rng);
  for (Index b = 0; b < 8; ++b) {
    EXPECT_EQ(batch.inputs(b, 0), static_cast<int>(std::floor(copy.uniform() * 980.0)));
  }
  EXPECT_EQ(rng.state().words, copy.state().words);
  // The same seed, the same batch.
  attn::Rng again(6);
  EXPECT_TRUE(attn_test::identical(corpus::random_windows(ids, 8, 20, again).inputs, batch.inputs));
}

TEST(RandomWindows, TakeTheOnlyWindowOfAShortTextAndRefuseShorterOnes) {
  const std::vector<int> ids{4, 8, 15, 16, 23, 42};
  attn::Rng rng(7);
  const attn::LanguageModelBatch batch = corpus::random_windows(ids, 3, 5, rng);
  for (Index b = 0; b < 3; ++b) {
    EXPECT_EQ(batch.inputs.row(b), (attn::TokenIds(1, 5) << 4, 8, 15, 16, 23).finished());
    EXPECT_EQ(batch.targets.row(b), (attn::TokenIds(1, 5) << 8, 15, 16, 23, 42).finished());
  }
  EXPECT_EQ(message_of([&] { corpus::random_windows(ids, 3, 6, rng); }),
            "random_windows: 6 tokens hold no window of 6 and the token after it: that takes 7");
  EXPECT_EQ(message_of([&] { corpus::random_windows(ids, 0, 2, rng); }),
            "random_windows: the batch size is 0: it must be at least 1");
  EXPECT_EQ(message_of([&] { corpus::random_windows(ids, 2, 0, rng); }),
            "random_windows: the window length is 0: it must be at least 1");
}

// A window written twice, by hand: n = 5, R = 3, the window 10 11 12 13 14 (targets 11 .. 15)
// becomes 10 11 12 10 11 with targets 11 12 10 11 12; rows past `rows` are left as they were.
TEST(RepeatHalves, WritesTheFirstHalfAgainAndReadsTheWindowAsPeriodic) {
  attn::LanguageModelBatch batch{attn::TokenIds(2, 5), attn::TokenIds(2, 5)};
  batch.inputs << 10, 11, 12, 13, 14,  //
      20, 21, 22, 23, 24;
  batch.targets << 11, 12, 13, 14, 15,  //
      21, 22, 23, 24, 25;
  const attn::LanguageModelBatch before = batch;
  corpus::repeat_halves(batch, 1);
  EXPECT_EQ(batch.inputs.row(0), (attn::TokenIds(1, 5) << 10, 11, 12, 10, 11).finished());
  EXPECT_EQ(batch.targets.row(0), (attn::TokenIds(1, 5) << 11, 12, 10, 11, 12).finished());
  EXPECT_EQ(batch.inputs.row(1), before.inputs.row(1));
  EXPECT_EQ(batch.targets.row(1), before.targets.row(1));
  // n = 4, R = 2: 20 21 20 21, targets 21 20 21 20; 0 rows changes nothing.
  attn::LanguageModelBatch even{attn::TokenIds(1, 4), attn::TokenIds(1, 4)};
  even.inputs << 20, 21, 22, 23;
  even.targets << 21, 22, 23, 24;
  corpus::repeat_halves(even, 0);
  EXPECT_EQ(even.inputs, (attn::TokenIds(1, 4) << 20, 21, 22, 23).finished());
  corpus::repeat_halves(even, 1);
  EXPECT_EQ(even.inputs, (attn::TokenIds(1, 4) << 20, 21, 20, 21).finished());
  EXPECT_EQ(even.targets, (attn::TokenIds(1, 4) << 21, 20, 21, 20).finished());
  EXPECT_EQ(message_of([&] { corpus::repeat_halves(batch, 3); }),
            "repeat_halves: 3 rows of a batch of 2");
}

}  // namespace test_12_corpus
