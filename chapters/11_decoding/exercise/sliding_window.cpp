// Exercise 11.2: the sliding window's rule. Write the body of exercise_sliding_window_allowed
// below, then build and run its tests (README.md, beside this file):
//
//   cmake --build build/release --target exercise_11
//   ctest --test-dir build/release -R Exercise11Window --output-on-failure
//
// Until your answer is right, the tests say in words what is wrong with it.
#include "sliding_window.hpp"

bool exercise_sliding_window_allowed(attn::Index i, attn::Index j, attn::Index W) {
  // TODO: return true when query i may read key j under a window of W keys, false otherwise.
  //
  // A decoder's query at position i may read keys of earlier positions and its own, never a
  // later one (causality). A sliding window of W keeps only the last W of those, counting the
  // query's own key: with W = 3, query 5 reads keys 3, 4 and 5, and query 1 reads 0 and 1.
  //
  // Two classic mistakes: chapter 05's band |i - j| <= W (a window on both sides, and 2W + 1
  // keys), and a window that reads W + 1 keys (an off-by-one at its oldest end). Count the
  // keys of query 5 with W = 3 on your rule before you run the tests.

  static_cast<void>(i);  // delete these three lines with the last one: they only keep the
  static_cast<void>(j);  // stub warning-free
  static_cast<void>(W);
  return false;
}
