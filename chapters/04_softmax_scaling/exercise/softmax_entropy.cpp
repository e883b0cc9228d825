// Exercise 04.2: the entropy of a softmax row, from its logits. Write the body of
// exercise_softmax_entropy below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_04
//   ctest --test-dir build/release -R Exercise04Entropy --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "softmax_entropy.hpp"

double exercise_softmax_entropy(const attn::VectorD& z) {
  // TODO: return H = -sum_j p_j ln p_j for p = softmax(z), in nats, finite for any finite z.
  //
  // Compute the weights the stable way (subtract the largest z_j before exp). Then take
  // ln p_j as z_j - lse(z) rather than log(p_j): a weight that underflowed to 0 then adds
  // 0 * (a finite number) = 0, which is its true share, instead of 0 * log(0) = 0 * -inf = NaN.
  // Or use H = lse(z) - sum_j p_j z_j, the page's form, where the same holds.
  //
  // Two classic mistakes: log(p_j) of an underflowed weight (NaN as soon as two logits are
  // more than 745 apart, which the unscaled rows of step 6 come close to), and log2 instead of
  // the natural log (bits, not the page's nats: ln 2 = 0.693 times too large). Check the sign:
  // the entropy is never negative.

  static_cast<void>(z);  // delete this line with the next one: it only keeps the stub
  return 0.0;            // warning-free
}
