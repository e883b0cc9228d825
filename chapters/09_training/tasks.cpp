// tasks.cpp: data for the reversal and induction tasks, greedy decoding, and head scores.
#include "tasks.hpp"

#include <algorithm>
#include <numeric>

namespace training {

namespace {

// A uniform integer in [lo, hi], from the course's generator.
Index uniform_int(attn::Rng& rng, Index lo, Index hi) {
  return lo + static_cast<Index>(rng.next_u64() % static_cast<std::uint64_t>(hi - lo + 1));
}

}  // namespace

std::string reversal_token(int id) {
  if (id == kPad) return "<pad>";
  if (id == kBos) return "<bos>";
  return std::string(1, static_cast<char>('a' + (id - 2)));
}

std::vector<std::string> reversal_tokens(std::span<const int> ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(reversal_token(id));
  return out;
}

attn::Seq2SeqBatch reversal_batch(attn::Rng& rng, Index B, Index n) {
  attn::Seq2SeqBatch batch{attn::TokenIds(B, n), attn::TokenIds(B, n), attn::TokenIds(B, n)};
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) {
      batch.src(b, i) = static_cast<int>(uniform_int(rng, 2, kReversalVocab - 1));
    }
    for (Index i = 0; i < n; ++i) batch.tgt_out(b, i) = batch.src(b, n - 1 - i);
    batch.tgt_in(b, 0) = kBos;  // shifted right: position i sees the answers before it
    for (Index i = 1; i < n; ++i) batch.tgt_in(b, i) = batch.tgt_out(b, i - 1);
  }
  return batch;
}

std::vector<int> greedy_reverse(const attn::Seq2Seq& model, std::span<const int> src) {
  const auto n = static_cast<Index>(src.size());
  const attn::TokenIds one = Eigen::Map<const attn::TokenIds>(src.data(), 1, n);  // [1 x n]
  const attn::TokenIds got = attn::seq2seq_greedy(model, one, kBos, n);           // [1 x n]
  return {got.data(), got.data() + n};
}

double exact_reversals(const attn::Seq2Seq& model, const attn::Seq2SeqBatch& batch) {
  // Every source decoded, side by side on the cores; a row counts when all its symbols are right.
  const attn::TokenIds got = attn::seq2seq_greedy(model, batch.src, kBos, batch.src.cols());
  const Index exact = (got.array() == batch.tgt_out.array()).rowwise().all().count();
  return static_cast<double>(exact) / static_cast<double>(batch.src.rows());
}

std::string induction_token(int id) {
  return std::string(1, static_cast<char>(id < 26 ? 'A' + id : 'a' + (id - 26)));
}

std::vector<std::string> induction_tokens(std::span<const int> ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(induction_token(id));
  return out;
}

InductionSequence induction_sequence(attn::Rng& rng, Index T) {
  InductionSequence s;
  s.length = uniform_int(rng, std::max<Index>(2, T / 4), std::max<Index>(2, 5 * T / 12));
  // T - L distinct tokens: a shuffled vocabulary's first T - L (Fisher-Yates, from the front).
  std::vector<int> vocab(static_cast<std::size_t>(kInductionVocab));
  std::iota(vocab.begin(), vocab.end(), 0);
  for (Index i = 0; i + 1 < kInductionVocab; ++i) {
    std::swap(vocab[static_cast<std::size_t>(i)],
              vocab[static_cast<std::size_t>(uniform_int(rng, i, kInductionVocab - 1))]);
  }
  const Index L = s.length;
  s.first = uniform_int(rng, 0, T - 2 * L);
  s.second = uniform_int(rng, s.first + L, T - L);
  s.ids.assign(static_cast<std::size_t>(T), 0);
  std::size_t filler = static_cast<std::size_t>(L);  // the segment is vocab[0 .. L)
  for (Index t = 0; t < T; ++t) {
    if (t >= s.first && t < s.first + L) {
      s.ids[static_cast<std::size_t>(t)] = vocab[static_cast<std::size_t>(t - s.first)];
    } else if (t >= s.second && t < s.second + L) {
      s.ids[static_cast<std::size_t>(t)] = vocab[static_cast<std::size_t>(t - s.second)];
    } else {
      s.ids[static_cast<std::size_t>(t)] = vocab[filler++];
    }
  }
  return s;
}

std::vector<InductionSequence> induction_sequences(attn::Rng& rng, Index B, Index T) {
  std::vector<InductionSequence> seqs;
  for (Index b = 0; b < B; ++b) seqs.push_back(induction_sequence(rng, T));
  return seqs;
}

attn::AttentionOnlyBatch induction_batch(const std::vector<InductionSequence>& seqs) {
  const auto B = static_cast<Index>(seqs.size());
  const auto T = static_cast<Index>(seqs.front().ids.size());
  attn::AttentionOnlyBatch batch{attn::TokenIds(B, T), attn::TokenIds::Constant(B, T, -1), -1};
  for (Index b = 0; b < B; ++b) {
    const InductionSequence& s = seqs[static_cast<std::size_t>(b)];
    for (Index t = 0; t < T; ++t) batch.inputs(b, t) = s.ids[static_cast<std::size_t>(t)];
    // In the second copy the first copy tells what comes next (its last token's successor is
    // filler, which nothing predicts).
    for (Index t = s.second; t + 1 < s.second + s.length; ++t) {
      batch.targets(b, t) = s.ids[static_cast<std::size_t>(t + 1)];
    }
  }
  return batch;
}

std::vector<HeadScores> head_scores(const attn::AttentionOnly& model,
                                    const std::vector<InductionSequence>& seqs) {
  const auto L = static_cast<Index>(model.layers.size());
  const Index H = model.layers.front().attn.heads;
  std::vector<HeadScores> scores;
  for (Index l = 0; l < L; ++l) {
    for (Index h = 0; h < H; ++h) scores.push_back({l, h, 0.0, 0.0});
  }
  double previous_count = 0, induction_count = 0;
  attn::AttentionOnlyCache cache;
  for (const InductionSequence& s : seqs) {
    attn::attention_only_forward<float>(model, s.ids, &cache, attn::NeedWeights::yes);
    const auto T = static_cast<Index>(s.ids.size());
    const Index shift = s.second - s.first;
    previous_count += static_cast<double>(T - 1);
    induction_count += static_cast<double>(s.length - 1);
    for (HeadScores& score : scores) {
      const attn::Matrix& w = cache.layers[static_cast<std::size_t>(score.layer)]
                                  .attn.weights[static_cast<std::size_t>(score.head)];  // [T x T]
      for (Index t = 1; t < T; ++t) score.previous += w(t, t - 1);
      for (Index t = s.second; t + 1 < s.second + s.length; ++t) {
        score.induction += w(t, t - shift + 1);
      }
    }
  }
  for (HeadScores& score : scores) {
    score.previous /= previous_count;
    score.induction /= induction_count;
  }
  return scores;
}

}  // namespace training
