// embedding.cpp: the table of token vectors and the lookup by id.
#include "attn/layers/embedding.hpp"

#include "attn/core/memory.hpp"

#include <string>

namespace attn {

Matrix embedding_init(Rng& rng, Index vocab, Index d_model) {
  require(vocab >= 1 && d_model >= 1, "embedding_init", [&] {
    return "vocab " + std::to_string(vocab) + " and d_model " + std::to_string(d_model) +
           " must both be at least 1";
  });
  require_fits_in_memory(
      "embedding_init", ElementCount(vocab, d_model), sizeof(float), "of parameters",
      [&] { return "vocab " + std::to_string(vocab) + " and d_model " + std::to_string(d_model); });
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

namespace {

void check_ids(std::span<const int> ids, Index vocab, const char* where) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < vocab, where, [&] {
      return "ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
             " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
    });
  }
}

}  // namespace

template <Real T>
MatrixOf<T> embedding_forward(const MatrixOf<T>& table, std::span<const int> ids) {
  check_ids(ids, table.rows(), "embedding_forward");
  MatrixOf<T> x(static_cast<Index>(ids.size()), table.cols());  // [n x d_model]
  for (std::size_t i = 0; i < ids.size(); ++i) x.row(static_cast<Index>(i)) = table.row(ids[i]);
  return x;
}

template <Real T>
void embedding_backward(std::span<const int> ids, const InView<T>& dy, MatrixOf<T>& d_table) {
  require(dy.rows() == static_cast<Index>(ids.size()) && dy.cols() == d_table.cols(),
          "embedding_backward", [&] {
            return "dy is " + shape_str(dy) + " for " + std::to_string(ids.size()) +
                   " ids and d_table is " + shape_str(d_table) + ": dy must be [n x d_model]";
          });
  check_ids(ids, d_table.rows(), "embedding_backward");
  // A row of d_table is added to while later rows of dy are still to be read.
  require_apart("embedding_backward", {{"d_table", memory_of(d_table)}}, {{"dy", memory_of(dy)}});
  for (std::size_t i = 0; i < ids.size(); ++i) d_table.row(ids[i]) += dy.row(static_cast<Index>(i));
}

#define ATTN_INSTANTIATE(T)                                                         \
  template MatrixOf<T> embedding_forward(const MatrixOf<T>&, std::span<const int>); \
  template void embedding_backward(std::span<const int>, const InView<T>&, MatrixOf<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn
