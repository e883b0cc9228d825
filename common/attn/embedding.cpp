// embedding.cpp: the table of token vectors and the lookup by id.
#include "attn/embedding.hpp"

#include <string>

namespace attn {

Matrix embedding_init(Rng& rng, Index vocab, Index d_model) {
  require(vocab >= 1 && d_model >= 1, "embedding_init", [&] {
    return "vocab " + std::to_string(vocab) + " and d_model " + std::to_string(d_model) +
           " must both be at least 1";
  });
  return random_normal(rng, vocab, d_model);  // [vocab x d_model]
}

Batch embed(const Matrix& table, const TokenIds& ids) {
  const Index B = ids.rows(), n = ids.cols(), vocab = table.rows();
  Batch X(B, n, table.cols());  // [B, n, d_model]
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) {
      const int id = ids(b, i);
      require(id >= 0 && id < vocab, "embed", [&] {
        return "ids[" + std::to_string(b) + "][" + std::to_string(i) + "] = " + std::to_string(id) +
               " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
      });
      X[b].row(i) = table.row(id);
    }
  }
  return X;
}

}  // namespace attn
