// Exercise 05.1: the padding masks of a batch. Write the body of exercise_padding_masks below,
// then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_05
//   ctest --test-dir build/release -R Exercise05Padding --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "padding_masks.hpp"

attn::AllowedBatch exercise_padding_masks(const attn::TokenIds& ids, int pad_id) {
  // TODO: return the B padding masks of ids [B x n], one [n x n] mask per sentence.
  //
  // Sentence b is row b of ids. Its mask says, for every query i and key j of that sentence,
  // whether query i may attend to key j (true = may, the course's one convention). A key whose
  // id is pad_id is not text: no query may attend to it. Every other key is allowed to every
  // query, the padded queries included (their outputs are ignored later; the page says why).
  //
  // attn::AllowedBatch masks(B, n, n) makes B masks of [n x n], every entry false; masks[b] is
  // mask b (an Eigen block you can write: masks[b](i, j) = ..., or masks[b].col(j) = ...).
  // ids(b, j) is the id of token j of sentence b.
  //
  // Two classic mistakes: blocking the padded queries (rows) instead of the padded keys
  // (columns), and PyTorch's opposite convention (key_padding_mask: true = blocked). Also:
  // use pad_id (not 0), and test each key's id, not a length: padding may come first.

  static_cast<void>(pad_id);  // delete this line with the last one: it only keeps the stub
                              // warning-free
  return attn::AllowedBatch(ids.rows(), ids.cols(), ids.cols());  // [B, n, n], all blocked
}
