// The encoder-decoder model of the training chapter (attn/models/seq2seq.hpp) against one whole
// training step of the same model in PyTorch (scripts/fixtures/train_step.py): the positional
// table, the logits, the loss, every parameter's gradient; plus its shape errors.
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/seq2seq.hpp"
#include "attn/training/optim.hpp"
#include "course/npy.hpp"

#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace test_seq2seq {

using attn::Index;
using attn::Matrix;
using attn::Seq2Seq;
using attn_test::identical;
using attn_test::message_of;

// ---- One case of step_<case>_*.npy --------------------------------------------------------------

struct StepCase {
  std::string name;  // "post"
  attn::Seq2SeqConfig config;
  double label_smoothing;

  course::NpyArray get(const std::string& what) const {
    return course::read_npy(attn_test::fixture("train_step", "step_" + name + "_" + what + ".npy"));
  }
  // A state_dict key's file name: dots become underscores.
  static std::string file_key(std::string key) {
    std::replace(key.begin(), key.end(), '.', '_');
    return key;
  }
  // Rows [first, first + rows) of a key's tensor (elements, for a vector), as [rows x cols].
  Matrix block(const std::string& prefix, const attn::Parameter<float>& p) const {
    const Matrix whole = get(prefix + file_key(p.key)).to_matrix();  // a vector loads as [1 x n]
    if (p.is_vector) return whole.middleCols(p.first, p.value.cols());
    return whole.middleRows(p.first, p.value.rows());
  }
  attn::TokenIds ids(const std::string& what) const {
    const course::NpyArray a = get(what);
    attn::TokenIds t(static_cast<Index>(a.shape[0]), static_cast<Index>(a.shape[1]));
    for (Index i = 0; i < t.size(); ++i)
      t.data()[i] = static_cast<int>(a.data[static_cast<std::size_t>(i)]);
    return t;
  }
  // The model with PyTorch's parameters, every tensor assigned by its state_dict key.
  Seq2Seq model() const {
    attn::Rng rng(1);
    Seq2Seq m = attn::seq2seq_init(rng, config);
    for (attn::Parameter<float>& p : attn::parameters(m)) p.value = block("param_", p);
    return m;
  }
  attn::Seq2SeqBatch batch() const { return {ids("src"), ids("tgt_in"), ids("tgt_out")}; }
};
// By name: ctest lists a parameter as gtest prints it, and its raw bytes hold pointers.
void PrintTo(const StepCase& c, std::ostream* os) { *os << c.name; }

const StepCase kPost{"post",
                     {.vocab = 11,
                      .d_model = 16,
                      .heads = 4,
                      .d_ff = 32,
                      .layers = 2,
                      .norm = attn::NormPlacement::post,
                      .tied = false,
                      .pad_id = 0,
                      .max_len = 7},
                     0.1};
const StepCase kPreTied{"pre_tied",
                        {.vocab = 11,
                         .d_model = 16,
                         .heads = 2,
                         .d_ff = 24,
                         .layers = 1,
                         .norm = attn::NormPlacement::pre,
                         .tied = true,
                         .pad_id = 0,
                         .max_len = 7},
                        0.0};

// max |a - b| / max |b|: the error relative to the expected tensor's scale. Entry-wise relative
// error is meaningless for the entries that are exactly 0 (PAD rows, the key biases).
double relative_error(const Matrix& a, const Matrix& b) {
  const double scale = std::max(static_cast<double>(b.cwiseAbs().maxCoeff()), 1e-30);
  return attn::max_abs_diff(a, b) / scale;
}

// Why 2e-5: the fixture itself agrees with a float64 re-run of the same step to 1.6e-6 of each
// gradient's scale (train_step.py's report); our float32 arithmetic adds its own rounding of the
// same size, through two layers of attention, layer norm and a softmax with logits up to ~17,
// summed in a different order. Ten times the fixture's own distance from the exact values
// leaves room for that and would still catch any wrong term (a missing factor or a dropped
// path moves a gradient by far more than its scale times 1e-3).
constexpr double kStepTolerance = 2e-5;

class StepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(StepTest, PositionalTableIsPyTorchsToTheBit) {
  const StepCase& c = GetParam();
  const Seq2Seq m = c.model();
  EXPECT_TRUE(identical(m.positions, c.get("pe").to_matrix()));
}

TEST_P(StepTest, LogitsAndLossMatchPyTorch) {
  const StepCase& c = GetParam();
  const Seq2Seq m = c.model();
  const attn::Seq2SeqStep step =
      attn::seq2seq_loss<float>(m, c.batch(), c.label_smoothing, nullptr, /*keep_logits=*/true);
  const course::NpyArray logits = c.get("logits");  // [B, n_t, V]
  ASSERT_EQ(step.logits.size(), logits.shape[0]);
  for (std::size_t b = 0; b < step.logits.size(); ++b) {
    EXPECT_LT(relative_error(step.logits[b], logits.slice(b)), kStepTolerance) << "pair " << b;
  }
  const double expected = c.get("loss").data[0];
  EXPECT_NEAR(step.loss, expected, kStepTolerance * expected);
  EXPECT_EQ(step.count, (c.batch().tgt_out.array() != 0).count());
}

TEST_P(StepTest, EveryGradientMatchesPyTorch) {
  const StepCase& c = GetParam();
  const Seq2Seq m = c.model();
  Seq2Seq grads = attn::zeros_like(m);
  attn::seq2seq_loss<float>(m, c.batch(), c.label_smoothing, &grads);
  double sum_squares = 0.0;
  std::size_t checked = 0;
  for (const attn::Parameter<float>& g : attn::parameters(grads)) {
    const Matrix expected = c.block("grad_", g);
    const Matrix got = g.value;
    // The key-bias block of in_proj_bias is exactly 0 mathematically (softmax ignores a shift
    // of a whole row of scores) and both sides hold round-off there: compare it with the whole
    // tensor's scale, the in_proj_bias file, rather than with its own.
    const double scale =
        std::max(static_cast<double>(
                     c.get("grad_" + StepCase::file_key(g.key)).to_matrix().cwiseAbs().maxCoeff()),
                 1e-30);
    EXPECT_LT(attn::max_abs_diff(got, expected) / scale, kStepTolerance)
        << g.key << " (first " << g.first << ")";
    sum_squares += got.cast<double>().squaredNorm();
    ++checked;
  }
  const std::size_t keys = [&] {
    std::size_t n = 0;
    for (const auto& p : attn::parameters(grads)) n += (p.first == 0);
    return n;
  }();
  EXPECT_EQ(keys, c.name == "post" ? 64u : 37u);  // train_step.py's named_parameters() count
  EXPECT_GT(checked, 0u);
  // clip_grad_norm_'s total: the 2-norm of every gradient entry, a tied table counted once.
  EXPECT_NEAR(std::sqrt(sum_squares), c.get("grad_norm").data[0],
              kStepTolerance * c.get("grad_norm").data[0]);
}

// The rest of PyTorch's step: clip_grad_norm_(max_norm), then one AdamW step (lr 1e-3, betas
// (0.9, 0.98), eps 1e-9, weight decay 0.01), every parameter against train_step.py's after_*.
// On the first step AdamW moves each entry by lr g / (|g| + eps) ~ lr sign(g) whatever |g|, so
// the parameters after it test the sign of every gradient entry and the decay; the clipping is
// tested by the norm above and by test_optim. Tolerance: 1e-6 of each tensor's scale, the
// fixture's own agreement with a float64 replay (1.1e-7) with room for our float rounding.
// Except the key biases: their true gradient is 0 and both sides hold round-off of random sign
// there, which AdamW turns into steps of up to lr; for them the test is |after - decayed| <= lr.
TEST_P(StepTest, ClipAndOneAdamWStepMatchPyTorch) {
  const StepCase& c = GetParam();
  Seq2Seq m = c.model();
  Seq2Seq grads = attn::zeros_like(m);
  attn::seq2seq_loss<float>(m, c.batch(), c.label_smoothing, &grads);
  const auto params = attn::parameters(m);
  const auto grad_list = attn::parameters(grads);
  const float norm = attn::clip_grad_norm(grad_list, c.get("max_norm").data[0]);
  EXPECT_NEAR(norm, c.get("grad_norm").data[0], kStepTolerance * norm);
  attn::Adam adamw({.lr = 1e-3,
                    .betas = {0.9, 0.98},
                    .eps = 1e-9,
                    .weight_decay = 0.01,
                    .decay = attn::WeightDecay::decoupled});
  const Seq2Seq before = m;
  adamw.step(params, grad_list);
  const auto before_list = attn::parameters(before);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const attn::Parameter<float>& p = params[i];
    const Matrix expected = c.block("after_", p);
    const bool key_bias = p.key.ends_with("in_proj_bias") && p.first == p.value.cols();
    if (key_bias) {
      const Matrix decayed = before_list[i].value * (1.0f - 1e-3f * 0.01f);
      EXPECT_LE(attn::max_abs_diff(Matrix(p.value), decayed), 1e-3 * 1.0001) << p.key;
      EXPECT_LE(attn::max_abs_diff(expected, decayed), 1e-3 * 1.0001) << p.key;
      continue;
    }
    const double scale = std::max(static_cast<double>(expected.cwiseAbs().maxCoeff()), 1e-30);
    EXPECT_LT(attn::max_abs_diff(Matrix(p.value), expected) / scale, 1e-6)
        << p.key << " (first " << p.first << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Seq2Seq, StepTest, ::testing::Values(kPost, kPreTied),
                         [](const auto& info) { return info.param.name; });

// ---- Shapes and bad input -----------------------------------------------------------------------

TEST(Seq2SeqTest, ParameterKeysFollowPyTorchsOrder) {
  // keys.txt lists model.named_parameters() in PyTorch's order; parameters() must walk the same.
  for (const StepCase& c : {kPost, kPreTied}) {
    const Seq2Seq m = c.model();
    std::vector<std::string> ours;
    for (const auto& p : attn::parameters(m)) {
      if (p.first == 0) ours.push_back(p.key);
    }
    std::ifstream keys(attn_test::fixture("train_step", "step_" + c.name + "_keys.txt"));
    std::vector<std::string> theirs;
    for (std::string line; std::getline(keys, line);)
      theirs.push_back(line.substr(0, line.find(' ')));
    EXPECT_EQ(ours, theirs) << c.name;
  }
}

// The pairs run on OpenMP threads, in shards whose gradients are summed in an order the batch
// fixes (sequence_shards.hpp): 1, 2 and 3 threads give the same loss, the same number correct
// and every gradient to the bit. 11 pairs (8 shards of one or two) with padding at the ends of
// some sources and targets; post-norm, untied, label smoothing 0.1: every term of the step.
// (test_attention_only.cpp shows that a sum following the threads fails this kind of test.)
TEST(Seq2SeqTest, EveryThreadCountGivesTheSameBits) {
  attn::Rng rng(31);
  const Seq2Seq m = attn::seq2seq_init(rng, kPost.config);  // V 11, max_len 7
  constexpr Index B = 11, n = 7;
  attn::Seq2SeqBatch batch{attn::TokenIds(B, n), attn::TokenIds(B, n), attn::TokenIds(B, n)};
  for (Index b = 0; b < B; ++b) {
    const Index length = 3 + b % 5;  // 3..7 real tokens, then padding (id 0)
    for (Index i = 0; i < n; ++i) {
      batch.src(b, i) = i < length ? 2 + static_cast<int>(rng.next_u64() % 9) : 0;
      batch.tgt_out(b, i) = i < length ? 2 + static_cast<int>(rng.next_u64() % 9) : 0;
    }
    batch.tgt_in(b, 0) = 1;
    for (Index i = 1; i < n; ++i) batch.tgt_in(b, i) = batch.tgt_out(b, i - 1);
  }
  const auto run = [&](int threads) {
    Seq2Seq g = attn::zeros_like(m);
    const attn::Seq2SeqStep s = attn::seq2seq_loss(m, batch, 0.1, &g, false, threads);
    return std::pair{s, g};
  };
  const auto [s1, g1] = run(1);
  const auto p1 = attn::parameters(g1);
  for (int threads : {2, 3}) {
    const auto [s, g] = run(threads);
    EXPECT_EQ(std::memcmp(&s.loss, &s1.loss, sizeof s.loss), 0) << threads << " threads";
    EXPECT_EQ(s.correct, s1.correct) << threads << " threads";
    const auto p = attn::parameters(g);
    for (std::size_t i = 0; i < p.size(); ++i) {
      EXPECT_TRUE(identical(p[i].value, p1[i].value)) << p[i].key << ", " << threads << " threads";
    }
  }
}

// Greedy decoding, batch and threads against the loop written out here for each source: the
// target starts as <bos> (1); each step appends the argmax of the last logits row. Equal
// tokens, for 1, 2 and 3 threads (each source is decoded by one thread, whatever the count).
// The comparison is not vacuous only if the argmax varies with the source and the step: the
// test checks that the decodings are not all one token.
TEST(Seq2SeqTest, GreedyDecodingIsTheStepByStepLoopOnAnyThreads) {
  attn::Rng rng(41);
  Seq2Seq m = attn::seq2seq_init(rng, kPost.config);  // V 11, max_len 7
  // At its initial scale the model predicts one token whatever it reads; tripled weights make
  // the argmax depend on the source and the step.
  for (attn::Parameter<float>& p : attn::parameters(m)) p.value *= 3.0f;
  constexpr Index B = 9, n = 6;
  attn::TokenIds src(B, n);
  for (Index i = 0; i < src.size(); ++i) src.data()[i] = 2 + static_cast<int>(rng.next_u64() % 9);
  attn::TokenIds expected(B, n);
  for (Index b = 0; b < B; ++b) {
    const std::vector<int> source(src.row(b).data(), src.row(b).data() + n);
    std::vector<int> target{1};
    for (Index i = 0; i < n; ++i) {
      const Matrix logits = attn::seq2seq_forward<float>(m, source, target);  // [i+1 x V]
      Index next = 0;
      logits.row(i).maxCoeff(&next);
      expected(b, i) = static_cast<int>(next);
      target.push_back(static_cast<int>(next));
    }
  }
  EXPECT_GT((expected.array() != expected(0, 0)).count(), 0);
  for (int threads : {1, 2, 3}) {
    EXPECT_EQ(attn::seq2seq_greedy(m, src, 1, n, threads), expected) << threads << " threads";
  }
  EXPECT_EQ(message_of([&] { attn::seq2seq_greedy(m, src, 1, 8); }),
            "seq2seq_greedy: steps is 8: it must be 1 to 7 (max_len: the last step reads bos and "
            "steps - 1 decoded tokens)");
  EXPECT_EQ(message_of([&] { attn::seq2seq_greedy(m, src, 11, 3); }),
            "seq2seq_greedy: bos 11 is outside the vocabulary [0, 11)");
  EXPECT_EQ(message_of([&] { attn::seq2seq_greedy(m, src, 1, 3, -2); }),
            "seq2seq_greedy: threads is -2: it must be >= 0 (0: default_threads())");
  attn::TokenIds bad = src;
  bad(5, 2) = 11;  // found by whichever thread runs its shard; the error reaches the caller
  EXPECT_NE(
      message_of([&] { attn::seq2seq_greedy(m, bad, 1, 3, 2); }).find("outside the vocabulary"),
      std::string::npos);
}

TEST(Seq2SeqTest, BadSizesAndSequencesThrowNamingThem) {
  attn::Rng rng(1);
  attn::Seq2SeqConfig c{.vocab = 6, .d_model = 8, .heads = 3, .d_ff = 16, .layers = 1};
  EXPECT_NE(message_of([&] { attn::seq2seq_init(rng, c); }).find("3 heads do not divide"),
            std::string::npos);
  c.heads = 2;
  c.max_len = 4;
  const Seq2Seq m = attn::seq2seq_init(rng, c);
  const std::vector<int> five{1, 2, 3, 4, 5}, two{1, 2}, bad{1, 9};
  EXPECT_NE(message_of([&] { attn::seq2seq_forward<float>(m, five, two); }).find("max_len"),
            std::string::npos);
  EXPECT_NE(
      message_of([&] { attn::seq2seq_forward<float>(m, two, bad); }).find("outside the vocabulary"),
      std::string::npos);
}

TEST(Seq2SeqTest, TheModelAsItsOwnGradientsAndAModelTooLargeAreRefused) {
  // seq2seq_loss(model, batch, 0, &model) added the gradients into the weights it was reading.
  attn::Rng rng(2);
  attn::Seq2SeqConfig c{.vocab = 6, .d_model = 8, .heads = 2, .d_ff = 16, .layers = 1};
  Seq2Seq m = attn::seq2seq_init(rng, c);
  const Seq2Seq before = m;
  const attn::Seq2SeqBatch batch{attn::TokenIds::Constant(2, 3, 2),
                                 attn::TokenIds::Constant(2, 3, 1),
                                 attn::TokenIds::Constant(2, 3, 3)};
  const std::string msg = message_of([&] { attn::seq2seq_loss(m, batch, 0.0, &m); });
  EXPECT_EQ(msg.rfind("seq2seq_loss: the gradient of src_embed.weight shares memory with the "
                      "layer's src_embed.weight",
                      0),
            0u)
      << msg;
  EXPECT_TRUE(identical(m.src_embed, before.src_embed));
  // d_model 2^32: its [E x E] projections alone are 2^64 entries, past Index.
  c.d_model = Index{1} << 32;
  const std::string big = message_of([&] { attn::seq2seq_init(rng, c); });
  EXPECT_EQ(big.rfind("seq2seq_init: d_model 4294967296, d_ff 16 and max_len ", 0), 0u) << big;
  EXPECT_NE(big.find("(more elements than an Index can count); this machine has "),
            std::string::npos)
      << big;
}

}  // namespace test_seq2seq
