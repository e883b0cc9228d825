// corpus.cpp: the King James Bible from Debian's bible program, a learner's text file, the
// character vocabulary, the train/validation split and batches of random windows.
#include "corpus.hpp"

#include "course/files.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace corpus {

namespace {

constexpr const char* kBibleProgram = "bible";
constexpr const char* kBibleArguments = "-f Gen1:1-Rev22:21";  // Genesis 1:1 to Revelation 22:21

std::string hex64(std::uint64_t x) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%016llX", static_cast<unsigned long long>(x));
  return buffer;
}

// The first executable regular file called `name` in PATH's folders, or "" when there is none:
// the search the shell would make, done here so that a missing program is told apart from one
// that fails (the shell's "not found" is only an exit status 127 and a line on stderr). As
// POSIX says, an empty entry is the current folder; an unset PATH is searched as execvp()
// searches it, in confstr(_CS_PATH) ("/bin:/usr/bin" with glibc).
std::string find_on_path(const std::string& name) {
  std::string dirs;
  if (const char* path = std::getenv("PATH")) {
    dirs = path;
  } else {
    dirs.resize(std::max<std::size_t>(::confstr(_CS_PATH, nullptr, 0), 1));
    ::confstr(_CS_PATH, dirs.data(), dirs.size());
    dirs.resize(std::strlen(dirs.c_str()));
  }
  std::size_t from = 0;
  for (;;) {
    const std::size_t colon = dirs.find(':', from);
    std::string dir = dirs.substr(from, colon == std::string::npos ? colon : colon - from);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string::npos) return "";
    from = colon + 1;
  }
}

// `s` as one word for /bin/sh, whatever it holds: in single quotes, each ' written as '\''.
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// All that `command` prints on its standard output, and how it ended. Its standard input is
// /dev/null (bible reads commands from it when it has no arguments; it must never wait for
// a terminal), its standard error the program's own, so a failure's reason shows above.
struct CommandOutput {
  std::string text;
  std::string failure;  // "" when it exited with status 0
};

CommandOutput run_command(const std::string& command, const std::string& shown) {
  FILE* pipe = ::popen((command + " </dev/null").c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("read_kjv: cannot run `" + shown + "`: " + std::strerror(errno));
  }
  CommandOutput out;
  char buffer[65536];
  std::size_t n = 0;
  try {
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.text.append(buffer, n);
  } catch (...) {  // out of memory: the child is still waited for
    ::pclose(pipe);
    throw;
  }
  const bool read_failed = std::ferror(pipe) != 0;
  const int read_errno = errno;
  const int status = ::pclose(pipe);
  if (read_failed) {
    out.failure = std::string("reading its output failed: ") + std::strerror(read_errno);
  } else if (status == -1) {
    out.failure = std::string("waiting for it failed: ") + std::strerror(errno);
  } else if (WIFSIGNALED(status)) {
    out.failure = "it was stopped by signal " + std::to_string(WTERMSIG(status));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.failure = "it exited with status " + std::to_string(WEXITSTATUS(status));
  }
  return out;
}

// Whether the start of a line is a verse's reference: a book ("Ge", "1Co"), then its chapter
// and verse, "1:1". It tells a verse from whatever else the program might print ("Bad Book:
// 'foo1:1'" for a reference it does not know, with exit status 0).
bool is_reference(std::string_view word) {
  const std::size_t colon = word.rfind(':');
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return colon != std::string_view::npos && colon > 0 && digit(word[colon - 1]) &&
         colon + 1 < word.size() && std::all_of(word.begin() + colon + 1, word.end(), digit);
}

}  // namespace

std::string read_kjv() {
  const std::string program = find_on_path(kBibleProgram);
  const std::string shown = std::string(kBibleProgram) + " " + kBibleArguments;
  if (program.empty()) {
    throw std::runtime_error(
        "read_kjv: the program `bible` is not on PATH. The corpus is the King James Bible from "
        "Debian's package bible-kjv; install it with `bash scripts/setup.sh` (which the README's "
        "commands run) or `sudo apt-get install bible-kjv`");
  }
  // exec: the shell becomes the program, so its exit status or signal is the program's own.
  const CommandOutput out =
      run_command("exec " + shell_quoted(program) + " " + kBibleArguments, shown);
  if (!out.failure.empty()) {
    throw std::runtime_error("read_kjv: `" + shown + "` (" + program + ") failed: " + out.failure);
  }
  if (out.text.empty()) throw std::runtime_error("read_kjv: `" + shown + "` printed nothing");

  // "Ge1:1 In the beginning God created the heaven and the earth." -> the text after the
  // first space: the reference goes, the verse stays, one per line.
  std::string text;
  text.reserve(out.text.size());
  std::size_t verses = 0;
  for (std::size_t from = 0; from < out.text.size();) {
    std::size_t end = out.text.find('\n', from);
    if (end == std::string::npos) end = out.text.size();  // a last line without its '\n'
    const std::string_view line(out.text.data() + from, end - from);
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || !is_reference(line.substr(0, space))) {
      throw std::runtime_error("read_kjv: line " + std::to_string(verses + 1) + " of `" + shown +
                               "` is not a reference and a verse: \"" +
                               std::string(line.substr(0, 80)) + "\"");
    }
    text.append(line.substr(space + 1));
    text += '\n';
    ++verses;
    from = end + 1;
  }

  const std::uint64_t checksum = attn::fnv1a64(text);
  if (text.size() != kKjvBytes || checksum != kKjvChecksum) {
    throw std::runtime_error(
        "read_kjv: `" + shown + "` gave " + std::to_string(verses) + " verses, " +
        std::to_string(text.size()) + " bytes of text with FNV-1a checksum " + hex64(checksum) +
        ", where the course was measured on " + std::to_string(kKjvVerses) + " verses, " +
        std::to_string(kKjvBytes) + " bytes with checksum " + hex64(kKjvChecksum) +
        " (bible-kjv 4.38 and 4.39, Debian 12 and 13): the package's version differs (`dpkg -s "
        "bible-kjv` shows yours)" +
        (text.size() < kKjvBytes ? ", or its output was cut short" : "") +
        ". The chapter's numbers were measured on that text; to train on this one anyway, "
        "save it to a file and pass it with --corpus FILE");
  }
  return text;
}

std::string read_text_file(const std::string& path) {
  std::string text;
  try {
    text = course::read_regular_file(path, kMaxTextBytes);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("read_text_file: ") + e.what());
  }
  if (text.empty()) {
    throw std::runtime_error("read_text_file: " + path +
                             " is empty: a corpus needs text to learn from");
  }
  return text;
}

CharVocab make_char_vocab(std::string_view text) {
  attn::require(!text.empty(), "make_char_vocab",
                "the text is empty: a vocabulary needs at least one character");
  std::array<std::int64_t, 256> count{};
  for (const char c : text) ++count[static_cast<unsigned char>(c)];
  CharVocab vocab;
  vocab.id_of.fill(-1);
  for (int byte = 0; byte < 256; ++byte) {  // in byte order, so the ids are sorted
    if (count[static_cast<std::size_t>(byte)] == 0) continue;
    vocab.id_of[static_cast<std::size_t>(byte)] = vocab.size();
    vocab.chars += static_cast<char>(byte);
    vocab.counts.push_back(count[static_cast<std::size_t>(byte)]);
  }
  return vocab;
}

std::string shown(char c) {
  const auto byte = static_cast<unsigned char>(c);
  char out[8];
  if (byte >= 0x20 && byte < 0x7F) {
    std::snprintf(out, sizeof out, "'%c'", byte);
  } else {
    std::snprintf(out, sizeof out, "\\x%02X", byte);
  }
  return out;
}

std::vector<int> encode(const CharVocab& vocab, std::string_view text) {
  std::vector<int> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    ids[i] = vocab.id_of[static_cast<unsigned char>(text[i])];
    attn::require(ids[i] >= 0, "encode", [&] {
      return "the character " + shown(text[i]) + " at offset " + std::to_string(i) +
             " is not in the vocabulary of " + std::to_string(vocab.size()) + " characters";
    });
  }
  return ids;
}

std::string decode(const CharVocab& vocab, std::span<const int> ids) {
  std::string text(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    attn::require(ids[i] >= 0 && ids[i] < vocab.size(), "decode", [&] {
      return "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
             " is outside the vocabulary [0, " + std::to_string(vocab.size()) + ")";
    });
    text[i] = vocab.chars[static_cast<std::size_t>(ids[i])];
  }
  return text;
}

Split split_tokens(std::vector<int> ids, double validation_fraction) {
  const double f = validation_fraction;
  attn::require(f > 0.0 && f < 1.0, "split_tokens", [&] {  // false for a NaN too
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", f);
    return "the validation fraction is " + std::string(shown) +
           ": it must be in (0, 1), so that both splits hold tokens";
  });
  const std::size_t n = ids.size();
  attn::require(n >= 2, "split_tokens", [&] {
    return std::to_string(n) + " tokens cannot be split: each split needs at least one";
  });
  // floor(n (1 - f)) as nanoGPT's int(n * 0.9), kept inside [1, n - 1].
  const auto train_size = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::floor(static_cast<double>(n) * (1.0 - f))), 1, n - 1);
  Split split;
  split.validation.assign(ids.begin() + static_cast<std::ptrdiff_t>(train_size), ids.end());
  ids.resize(train_size);
  split.train = std::move(ids);
  return split;
}

void check_long_enough(std::size_t tokens, Index context, const char* which) {
  attn::require_at_least_one(context, "check_long_enough", "the context");
  const auto needed = static_cast<std::size_t>(context) + 1;
  attn::require(tokens >= needed, "check_long_enough", [&] {
    return std::string(which) + " has " + std::to_string(tokens) + " tokens, fewer than the " +
           std::to_string(needed) + " one window needs (a context of " + std::to_string(context) +
           " tokens and the token that follows it)";
  });
}

attn::LanguageModelBatch random_windows(std::span<const int> ids, Index batch, Index length,
                                        attn::Rng& rng) {
  attn::require_at_least_one(batch, "random_windows", "the batch size");
  attn::require_at_least_one(length, "random_windows", "the window length");
  attn::require(ids.size() >= static_cast<std::size_t>(length) + 1, "random_windows", [&] {
    return std::to_string(ids.size()) + " tokens hold no window of " + std::to_string(length) +
           " and the token after it: that takes " + std::to_string(length + 1);
  });
  // The starts 0 .. count - 1, where the last window's target is the last id.
  const std::size_t count = ids.size() - static_cast<std::size_t>(length);
  attn::LanguageModelBatch out{attn::TokenIds(batch, length), attn::TokenIds(batch, length)};
  for (Index b = 0; b < batch; ++b) {
    // floor(u count) with u = k 2^-53, k uniform in [0, 2^53): each start takes floor or ceil
    // of 2^53 / count of the k's, so its probability is off from 1/count by less than
    // count / 2^53 relatively (5e-10 for the Bible's 4.1 million starts): far below anything a
    // training run can notice. u count stays below count after rounding (u <= 1 - 2^-53); the
    // min() only says so.
    const auto start =
        std::min(static_cast<std::size_t>(std::floor(rng.uniform() * static_cast<double>(count))),
                 count - 1);
    for (Index i = 0; i < length; ++i) {
      out.inputs(b, i) = ids[start + static_cast<std::size_t>(i)];
      out.targets(b, i) = ids[start + static_cast<std::size_t>(i) + 1];
    }
  }
  return out;
}

void repeat_halves(attn::LanguageModelBatch& batch, Index rows) {
  const Index B = batch.inputs.rows(), n = batch.inputs.cols();
  attn::require(rows >= 0 && rows <= B, "repeat_halves",
                [&] { return std::to_string(rows) + " rows of a batch of " + std::to_string(B); });
  const Index period = (n + 1) / 2;
  for (Index b = 0; b < rows; ++b) {
    for (Index i = 0; i < n; ++i) {
      batch.targets(b, i) = batch.inputs(b, (i + 1) % period);
      if (i >= period) batch.inputs(b, i) = batch.inputs(b, i - period);
    }
  }
}

Source load(const std::string& file) {
  if (file.empty()) {
    return {"the King James Bible (Debian's bible-kjv, public domain)", read_kjv()};
  }
  return {file, read_text_file(file)};
}

std::string unknown_characters(const CharVocab& vocab, std::string_view text) {
  std::string out;
  std::array<bool, 256> seen{};
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (vocab.id_of[byte] >= 0 || seen[byte]) continue;
    seen[byte] = true;
    out += (out.empty() ? "" : " ") + shown(c);
  }
  return out;
}

}  // namespace corpus
