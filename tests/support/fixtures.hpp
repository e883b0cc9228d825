// The PyTorch and NumPy fixtures of tests/data, grouped by the script that makes them: every
// file scripts/fixtures/<script>.py writes is in tests/data/<script>/ (scripts/make_fixtures.sh).
#pragma once

#include <filesystem>
#include <string_view>

namespace attn_test {

/// tests/data/<script>/<file>: `fixture("rnn", "rnn_h0_weight_ih.npy")` is a file rnn.py wrote.
inline std::filesystem::path fixture(std::string_view script, std::string_view file) {
  return std::filesystem::path(ATTN_TEST_DATA_DIR) / script / file;
}

/// The folder of one script's fixtures, tests/data/<script>.
inline std::filesystem::path fixture_folder(std::string_view script) {
  return std::filesystem::path(ATTN_TEST_DATA_DIR) / script;
}

}  // namespace attn_test
