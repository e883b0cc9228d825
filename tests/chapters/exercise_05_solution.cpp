// Right answers to exercises 05.1 to 05.3 (chapters/05_masking/exercise/), written with plain
// loops and without the library's masks, softmax or attention, so that the course's suite can
// prove that tests/chapters/exercise_05.cpp passes right answers as well as failing the stubs.
// Each marked region below is the worked answer chapter 05's page shows.
#include "causal_mask.hpp"
#include "masked_softmax.hpp"
#include "padding_masks.hpp"

#include <cmath>

// 05.1: a key whose id is the pad id is blocked for every query of its sentence.
// [answer_05_1]
attn::AllowedBatch exercise_padding_masks(const attn::TokenIds& ids, int pad_id) {
  const attn::Index B = ids.rows(), n = ids.cols();
  attn::AllowedBatch masks(B, n, n);  // [B, n, n]
  for (attn::Index b = 0; b < B; ++b) {
    for (attn::Index i = 0; i < n; ++i) {
      for (attn::Index j = 0; j < n; ++j) masks[b](i, j) = ids(b, j) != pad_id;  // key j's id
    }
  }
  return masks;
}
// [answer_05_1]

// 05.2: the past and the token itself, never the future.
// [answer_05_2]
attn::AllowedMask exercise_causal_mask(attn::Index n) {
  attn::AllowedMask m(n, n);  // [n x n]
  for (attn::Index i = 0; i < n; ++i) {
    for (attn::Index j = 0; j < n; ++j) m(i, j) = j <= i;
  }
  return m;
}
// [answer_05_2]

// 05.3: the softmax over the allowed keys only; a row with none stays zeros.
// [answer_05_3]
attn::MatrixD exercise_masked_softmax(const attn::MatrixD& scores,
                                      const attn::AllowedMask& allowed) {
  attn::MatrixD w = attn::MatrixD::Zero(scores.rows(), scores.cols());  // [n_q x n_k]
  for (attn::Index i = 0; i < scores.rows(); ++i) {
    bool any = false;
    double max = 0;  // the largest allowed score: every exponent below is <= 0, one is 0
    for (attn::Index j = 0; j < scores.cols(); ++j) {
      if (allowed(i, j) && (!any || scores(i, j) > max)) max = scores(i, j);
      any = any || allowed(i, j);
    }
    if (!any) continue;  // no key to read: the row stays zeros
    double sum = 0;
    for (attn::Index j = 0; j < scores.cols(); ++j) {
      if (!allowed(i, j)) continue;  // blocked: its weight stays exactly 0
      w(i, j) = std::exp(scores(i, j) - max);
      sum += w(i, j);
    }
    w.row(i) /= sum;  // sum >= 1, from the largest score's exp(0)
  }
  return w;
}
// [answer_05_3]
