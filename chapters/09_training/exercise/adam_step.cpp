// Exercise 09.3: one step of Adam. Write the body of exercise_adam_step below, then build and run
// its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_09
//   ctest --test-dir build/release -R Exercise09Adam --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "adam_step.hpp"

void exercise_adam_step(attn::MatrixD& p, const attn::MatrixD& g, attn::MatrixD& m,
                        attn::MatrixD& v, attn::Index t, double lr, double beta1, double beta2,
                        double eps) {
  // TODO: update m, v and then p in place, entry by entry, for step t (the first step is 1).
  //
  // 1. The moments, from this step's gradient: m is a running mean of g, v one of g^2,
  //
  //      m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
  //
  // 2. The update, with the NEW m and v. Both started at 0, so early on they are too small by
  //    the factors 1 - beta1^t and 1 - beta2^t (the bias corrections; std::pow(beta1, t)):
  //
  //      p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  //
  //    On step 1 this moves every entry by about lr against its gradient's sign, whatever the
  //    gradient's size: a quick check of yours by hand.
  //
  // Two classic mistakes: leaving out the bias corrections (the first steps are then far too
  // large or too small), and putting eps inside the square root, sqrt(v_hat + eps), which is
  // another optimiser: it barely moves an entry whose gradient is small next to sqrt(eps).
  //
  // Eigen, if you want it: a.array() * b.array(), a.array().sqrt() and a.array() / b.array()
  // work entry by entry (m.array() = ... writes into m). A loop over p(i, j) is just as good.

  static_cast<void>(p);  // delete these nine lines: they only keep the stub warning-free
  static_cast<void>(g);
  static_cast<void>(m);
  static_cast<void>(v);
  static_cast<void>(t);
  static_cast<void>(lr);
  static_cast<void>(beta1);
  static_cast<void>(beta2);
  static_cast<void>(eps);
}
