// bench_training: the training chapter's costs, one core.
//   AttentionForward / AttentionBackward  one attention call, n tokens, d = 64: the backward
//       runs four GEMM-shaped products (dV, dP, dQ, dK) to the forward's two (FLOP/s counts
//       4 n^2 d for the forward, 8 n^2 d for the backward); measured, the two take about the
//       same time, because the forward's softmax (a scalar exp per score) costs as much as
//       two GEMMs (chapter 10)
//   Seq2SeqStep/threads  one training step of the encoder-decoder (forward, loss, backward,
//       clipping, Adam's update of every parameter) on a batch of 32 reversal pairs of length 8,
//       in target tokens per second of wall time, at the chapter's default sizes: d_model 32,
//       1 head, d_ff 64, 2 pre-norm layers each; the pairs on 1 or 2 threads
//       (sequence_shards.hpp)
//
//   LanguageModelStep/threads  one training step of chapter 12's language model (forward, loss,
//       backward, clipping, Adam) at the chapter's default sizes: vocabulary 75, d_model 128,
//       4 query heads over 2 key/value heads, d_ff 512, 4 layers, batch 12 windows of 64 tokens,
//       in tokens (B n) per second of wall time; benchmarks/pytorch_language_model.py times
//       PyTorch on the same model, batch and optimiser
//
//   build/release/benchmarks/bench_training --benchmark_min_time=0.5
//   (not pinned to one core with taskset: Seq2SeqStep/2 needs two)
#include "attn/core/random.hpp"
#include "attn/layers/parameters.hpp"
#include "attn/models/language_model_training.hpp"
#include "attn/models/seq2seq.hpp"
#include "attn/ops/attention.hpp"
#include "attn/training/optim.hpp"

#include <benchmark/benchmark.h>

#include <cmath>

namespace {

using attn::Index;
using attn::Matrix;

constexpr Index kD = 64;

void BM_AttentionForward(benchmark::State& state) {
  const Index n = state.range(0);
  attn::Rng rng(42);
  const Matrix Q = attn::random_normal(rng, n, kD), K = attn::random_normal(rng, n, kD),
               V = attn::random_normal(rng, n, kD);  // [n x d] each
  attn::AttentionResult r;
  attn::attention_into(Q, K, V, r);
  for (auto _ : state) {
    attn::attention_into(Q, K, V, r);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  const double nf = static_cast<double>(n);
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * nf * nf * kD, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionBackward(benchmark::State& state) {
  const Index n = state.range(0);
  attn::Rng rng(42);
  const Matrix Q = attn::random_normal(rng, n, kD), K = attn::random_normal(rng, n, kD),
               V = attn::random_normal(rng, n, kD), dO = attn::random_normal(rng, n, kD);
  const attn::AttentionResult r = attn::attention(Q, K, V);
  Matrix dQ(n, kD), dK(n, kD), dV(n, kD);  // [n x d] each
  for (auto _ : state) {
    attn::attention_backward_into(Q, K, V, r.weights, dO, dQ, dK, dV);
    benchmark::DoNotOptimize(dQ.data());
    benchmark::ClobberMemory();
  }
  const double nf = static_cast<double>(n);
  state.counters["FLOP/s"] =
      benchmark::Counter(8.0 * nf * nf * kD, benchmark::Counter::kIsIterationInvariantRate);
}

// 32 random sequences of length 8 over tokens 2..11, the target their reversal.
attn::Seq2SeqBatch reversal_batch(attn::Rng& rng, Index B, Index n) {
  attn::Seq2SeqBatch batch{attn::TokenIds(B, n), attn::TokenIds(B, n), attn::TokenIds(B, n)};
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) batch.src(b, i) = 2 + static_cast<int>(rng.next_u64() % 10);
    for (Index i = 0; i < n; ++i) batch.tgt_out(b, i) = batch.src(b, n - 1 - i);
    batch.tgt_in(b, 0) = 1;  // the begin token
    for (Index i = 1; i < n; ++i) batch.tgt_in(b, i) = batch.tgt_out(b, i - 1);
  }
  return batch;
}

void BM_Seq2SeqStep(benchmark::State& state) {
  constexpr Index B = 32, n = 8;
  const int threads = static_cast<int>(state.range(0));
  attn::Rng rng(7);
  attn::Seq2Seq model = attn::seq2seq_init(rng, {.vocab = 12,
                                                 .d_model = 32,
                                                 .heads = 1,
                                                 .d_ff = 64,
                                                 .layers = 2,
                                                 .norm = attn::NormPlacement::pre,
                                                 .max_len = n,
                                                 .embedding_std = 1.0 / std::sqrt(32.0)});
  attn::Seq2Seq grads = attn::zeros_like(model);
  const attn::Seq2SeqBatch batch = reversal_batch(rng, B, n);
  auto params = attn::parameters(model);
  const auto grad_list = attn::parameters(grads);
  attn::Adam adam({.lr = 3e-3, .betas = {0.9, 0.98}, .eps = 1e-9});
  for (auto _ : state) {
    attn::set_zero(grads);
    attn::Seq2SeqStep step = attn::seq2seq_loss(model, batch, 0.0, &grads, false, threads);
    attn::clip_grad_norm(grad_list, 1.0);
    adam.step(params, grad_list);
    // A non-const lvalue: Google Benchmark 1.8 (Debian 13) deprecates the const& overload.
    benchmark::DoNotOptimize(step.loss);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(B * n), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LanguageModelStep(benchmark::State& state) {
  constexpr Index V = 75, B = 12, n = 64;
  const int threads = static_cast<int>(state.range(0));
  attn::Rng rng(7);
  attn::LanguageModel model = attn::language_model_init(rng, {.vocab = V,
                                                              .d_model = 128,
                                                              .heads = 4,
                                                              .kv_heads = 2,
                                                              .d_ff = 512,
                                                              .layers = 4,
                                                              .context = n});
  attn::LanguageModel grads = attn::zeros_like(model);
  // Random ids: a step's time does not depend on them.
  attn::LanguageModelBatch batch{attn::TokenIds(B, n), attn::TokenIds(B, n)};  // [B x n] each
  for (Index b = 0; b < B; ++b) {
    for (Index i = 0; i < n; ++i) {
      batch.inputs(b, i) = static_cast<int>(rng.next_u64() % V);
      batch.targets(b, i) = static_cast<int>(rng.next_u64() % V);
    }
  }
  auto params = attn::parameters(model);
  const auto grad_list = attn::parameters(grads);
  attn::Adam adam({.lr = 2e-3, .betas = {0.9, 0.98}, .eps = 1e-9});
  for (auto _ : state) {
    attn::set_zero(grads);
    attn::LanguageModelStep step =
        attn::language_model_loss(model, batch, &grads, nullptr, false, threads);
    attn::clip_grad_norm(grad_list, 1.0);
    adam.step(params, grad_list);
    benchmark::DoNotOptimize(step.loss);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(B * n), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_AttentionForward)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_AttentionBackward)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_Seq2SeqStep)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_LanguageModelStep)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
