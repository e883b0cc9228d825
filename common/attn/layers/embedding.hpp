/// @file
/// Token embeddings: a learned table with one row per vocabulary entry, looked up by id.
///
///     table [vocab x d_model]     torch.nn.Embedding(vocab, d_model).weight
///     embed(table, ids [B x n])   -> [B, n, d_model], row (b, i) = table row ids(b, i)
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/matrix.hpp"
#include "attn/core/random.hpp"

#include <span>

namespace attn {

/// nn.Embedding's default initialisation: every entry ~ N(0, 1), filled row by row.
/// The distribution is PyTorch's; the numbers are attn::Rng's. Throws
/// std::invalid_argument, before drawing anything, for sizes whose parameters need more memory
/// than the machine has or more elements than an Index can count (core/memory.hpp).
Matrix embedding_init(Rng& rng, Index vocab, Index d_model);

/// Looks every id up: ids [B x n] -> [B, n, d_model]. Throws std::invalid_argument naming the
/// position of any id outside [0, vocab).
Batch embed(const Matrix& table, const TokenIds& ids);

/// One sequence: ids [n] -> [n x d_model], row i = table row ids[i] (nn.Embedding's forward).
/// Throws std::invalid_argument naming the position of any id outside [0, vocab).
template <Real T>
MatrixOf<T> embedding_forward(const MatrixOf<T>& table, std::span<const int> ids);

/// Its backward pass: row i of dy [n x d_model] is added to row ids[i] of d_table
/// [vocab x d_model] (a scatter-add, nn.Embedding's backward). A token that occurs twice
/// collects both rows; a token that does not occur gets nothing. Accumulates (+=), so a table
/// shared with the output layer (tied weights) sums both uses. Throws std::invalid_argument for
/// a shape or an id that does not fit, or when dy views d_table's memory (a row added to would
/// be read later as dy).
template <Real T>
void embedding_backward(std::span<const int> ids, const InView<T>& dy, MatrixOf<T>& d_table);

}  // namespace attn
