// Exercise 12.1: one byte-pair merge. The body is yours to write, in merge_pair.cpp beside
// this file; README.md says how to check it.
#pragma once

#include <vector>

/// What one merge did: the pair it chose and the text after it.
struct ExerciseMerge {
  int first = -1, second = -1;  ///< the pair (a, b) merged: a then b, neighbours in the text
  std::vector<int> ids;         ///< the text with every chosen (a, b) replaced by new_id
};

/// Difficulty 2 of 3, importance 2 of 3, about 25 minutes.
///
/// One step of learning byte-pair merges (chapter 12's --merges, corpus::learn_merges):
///
///   1. count every pair of neighbouring tokens (ids[i], ids[i + 1]), i = 0 .. n - 2: every
///      position counts, so "aaa" holds the pair (a, a) twice;
///   2. the pair with the largest count wins; on a tie the pair with the smaller first id,
///      then the smaller second id (so the merges depend on the text alone);
///   3. replace its occurrences, left to right, each by new_id: an occurrence takes its two
///      tokens out of play, so "aaa" with (a, a) becomes "X a", not "X X".
///
/// ids holds at least two tokens (ids >= 0, all below new_id). Returns the pair and the new
/// text, shorter by one token for each occurrence replaced.
ExerciseMerge exercise_merge_pair(const std::vector<int>& ids, int new_id);
