// Exercise 12.3: the distribution a token is drawn from. Write the body of
// exercise_sampling_probabilities below, then build and run its tests (README.md, beside this
// file):
//
//   cmake --build build/release --target exercise_12
//   ctest --test-dir build/release -R Exercise12Sampling --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "sampling_probabilities.hpp"

attn::MatrixD exercise_sampling_probabilities(const attn::MatrixD& logits, double temperature,
                                              attn::Index top_k) {
  // TODO: return p [1 x V], the softmax of logits / temperature over the top-k ids, 0 elsewhere.
  //
  // 1. Top-k. With k = top_k between 1 and V - 1, find v_k, the k-th largest logit (copy the
  //    row into a std::vector<double> and sort it, largest first: v_k = sorted[k - 1]). Keep
  //    every id whose logit is >= v_k, ties included. k = 0 and k >= V keep every id.
  // 2. Weights. For a kept id j, w_j = exp((z_j - m) / T), m the largest logit: the same
  //    softmax as exp(z_j / T) (the factor exp(-m / T) cancels), and no overflow. The others
  //    get 0.
  // 3. Normalise: p_j = w_j / (sum of the kept weights).
  //
  // The two classic mistakes: dividing the probabilities by T instead of the logits (after
  // normalising, T has then changed nothing), and applying top-k after a softmax over every id
  // without normalising again, so that the kept probabilities sum to less than 1.

  static_cast<void>(temperature);  // delete these two lines with the last one: they only keep
  static_cast<void>(top_k);        // the stub warning-free
  return attn::MatrixD::Zero(1, logits.cols());
}
