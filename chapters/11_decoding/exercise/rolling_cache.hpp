// Exercise 11.3: a rolling KV cache and one decode step. The body is yours to write, in
// rolling_cache.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// The keys and values of the last W tokens of one head, in a ring of W rows (the cache of a
/// sliding window of W keys: its memory stays W rows however long the sequence). The token at
/// position p sits in row p mod W, so once the ring is full each new token overwrites the
/// oldest. The library's version is attn::RowCacheOf (attn/kernels/row_cache.hpp).
struct ExerciseRing {
  attn::MatrixD keys;        ///< [W x d]: row p mod W = the key of the token at position p
  attn::MatrixD values;      ///< [W x d]: its value, in the same row
  attn::Index appended = 0;  ///< tokens ever appended: the position the next one gets

  /// W, the window: the ring's rows.
  attn::Index capacity() const { return keys.rows(); }
};

/// An empty ring of W rows of width d (given, not part of the exercise).
inline ExerciseRing exercise_make_ring(attn::Index W, attn::Index d) {
  return {attn::MatrixD::Zero(W, d), attn::MatrixD::Zero(W, d), 0};  // [W x d] each
}

/// What one decode step computes.
struct ExerciseDecodeStep {
  attn::MatrixD out;      ///< [1 x d]: the attention output of the query
  attn::MatrixD weights;  ///< [1 x held]: its softmax weights, the oldest key held first
};

/// Difficulty 3 of 3, importance 3 of 3, about 40 minutes.
///
/// One decode step of the token at position p = ring.appended: stores its key k and value v
/// [1 x d] in row p mod W (then ring.appended = p + 1), and attends with its query q [1 x d]
/// over the held = min(p + 1, W) tokens at positions p - held + 1 .. p, oldest first:
///
///     s_j = q . k_j / sqrt(d),   weights = softmax(s) [1 x held],   out = sum_j w_j v_j [1 x d]
///
/// the row p of sliding-window attention (attn::sliding_window_mask(n, W)).
ExerciseDecodeStep exercise_append_and_attend(ExerciseRing& ring, const attn::MatrixD& q,
                                              const attn::MatrixD& k, const attn::MatrixD& v);
