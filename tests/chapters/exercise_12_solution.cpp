// Right answers to exercises 12.1 to 12.3 (chapters/12_language_model/exercise/), written
// without the library's merges, loss or sampling, so that the course's suite can prove that
// tests/chapters/exercise_12.cpp passes right answers as well as failing the stubs.
#include "merge_pair.hpp"
#include "nats_per_character.hpp"
#include "sampling_probabilities.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <utility>
#include <vector>

// 12.1: count at every position, the largest count wins (the map's order breaks ties), then
// replace left to right.
// [answer_12_1]
ExerciseMerge exercise_merge_pair(const std::vector<int>& ids, int new_id) {
  std::map<std::pair<int, int>, int> count;  // sorted by first id, then second: the tie rule
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) ++count[{ids[i], ids[i + 1]}];
  std::pair<int, int> best;
  int best_count = 0;
  for (const auto& [pair, n] : count) {
    if (n > best_count) best = pair, best_count = n;  // strictly: a tie keeps the smaller pair
  }
  ExerciseMerge merge{best.first, best.second, {}};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i + 1 < ids.size() && ids[i] == best.first && ids[i + 1] == best.second) {
      merge.ids.push_back(new_id);
      ++i;  // the pair's second token is used up
    } else {
      merge.ids.push_back(ids[i]);
    }
  }
  return merge;
}
// [answer_12_1]

// 12.2: each row's loss from a log-sum-exp with its maximum subtracted, summed, over the
// characters of the targets.
// [answer_12_2]
double exercise_nats_per_character(const attn::MatrixD& logits, const std::vector<int>& targets,
                                   const std::vector<int>& characters) {
  double nats = 0.0, chars = 0.0;
  for (attn::Index r = 0; r < logits.rows(); ++r) {
    const int t = targets[static_cast<std::size_t>(r)];
    const double m = logits.row(r).maxCoeff();
    double sum = 0.0;
    for (attn::Index j = 0; j < logits.cols(); ++j) sum += std::exp(logits(r, j) - m);
    nats += m + std::log(sum) - logits(r, t);
    chars += characters[static_cast<std::size_t>(t)];
  }
  return nats / chars;
}
// [answer_12_2]

// 12.3: the threshold v_k from a sorted copy, then a softmax of z / T over the ids at or above
// it.
// [answer_12_3]
attn::MatrixD exercise_sampling_probabilities(const attn::MatrixD& logits, double temperature,
                                              attn::Index top_k) {
  const attn::Index V = logits.cols();
  std::vector<double> sorted(logits.data(), logits.data() + V);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const bool every_id = top_k == 0 || top_k >= V;
  const double threshold = every_id ? sorted.back() : sorted[static_cast<std::size_t>(top_k - 1)];
  const double m = sorted.front();              // the largest logit
  attn::MatrixD p = attn::MatrixD::Zero(1, V);  // [1 x V]
  for (attn::Index j = 0; j < V; ++j) {
    if (logits(0, j) >= threshold) p(0, j) = std::exp((logits(0, j) - m) / temperature);
  }
  return p / p.sum();
}
// [answer_12_3]
