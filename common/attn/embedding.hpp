/// @file
/// Token embeddings: a learned table with one row per vocabulary entry, looked up by id.
///
///   table [vocab x d_model]     torch.nn.Embedding(vocab, d_model).weight
///   embed(table, ids [B x n])   -> [B, n, d_model], row (b, i) = table row ids(b, i)
#pragma once

#include "attn/batch.hpp"
#include "attn/matrix.hpp"
#include "attn/random.hpp"

namespace attn {

/// nn.Embedding's default initialisation: every entry ~ N(0, 1), filled row by row.
/// The distribution is PyTorch's; the numbers are attn::Rng's.
Matrix embedding_init(Rng& rng, Index vocab, Index d_model);

/// Looks every id up: ids [B x n] -> [B, n, d_model]. Throws std::invalid_argument naming the
/// position of any id outside [0, vocab).
Batch embed(const Matrix& table, const TokenIds& ids);

}  // namespace attn
