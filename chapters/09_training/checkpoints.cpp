// Chapter 09's checkpoints (checkpoints.hpp).
#include "checkpoints.hpp"

#include "course/checkpoint.hpp"
#include "course/dump.hpp"

#include <span>

namespace training {

namespace {

constexpr Index kSavedExamples = 8;  // held-out sequences saved with a checkpoint, for its replay

// Where the weights went, and the command that replays them in PyTorch.
void say_saved(course::Chapter& ch, const std::string& dir) {
  ch.say("saved the weights to {} (replay: /usr/bin/python3 scripts/check_training_checkpoint.py "
         "{})",
         dir, dir);
}

}  // namespace

void save_reversal(course::Chapter& ch, const std::string& dir, const attn::Seq2Seq& model,
                   const attn::Seq2SeqBatch& held_out) {
  const Index k = kSavedExamples, n = held_out.src.cols();
  attn::Batch logits(k, n, model.vocab());  // [k, n, V]
  attn::Matrix greedy(k, n);                // [k x n]
  for (Index b = 0; b < k; ++b) {
    const std::span<const int> src(held_out.src.row(b).data(), static_cast<std::size_t>(n));
    logits[b] = attn::seq2seq_forward<float>(
        model, src, {held_out.tgt_in.row(b).data(), static_cast<std::size_t>(n)});
    const std::vector<int> got = greedy_reverse(model, src);
    for (Index i = 0; i < n; ++i)
      greedy(b, i) = static_cast<float>(got[static_cast<std::size_t>(i)]);
  }
  course::save_checkpoint(dir, ch.source(), model, [&](course::Dumper& d) {
    d("eval_src", attn::Matrix(held_out.src.topRows(k).cast<float>()));
    d("eval_tgt_in", attn::Matrix(held_out.tgt_in.topRows(k).cast<float>()));
    d("eval_logits", logits);
    d("eval_greedy", greedy);
  });
  say_saved(ch, dir);
}

void save_induction(course::Chapter& ch, const std::string& dir, const attn::AttentionOnly& model,
                    const std::vector<InductionSequence>& held_out) {
  const Index k = kSavedExamples, T = model.context();
  attn::Matrix ids(k, T);                   // [k x T]
  attn::Batch logits(k, T, model.vocab());  // [k, T, V]
  for (Index b = 0; b < k; ++b) {
    const std::vector<int>& seq = held_out[static_cast<std::size_t>(b)].ids;
    for (Index t = 0; t < T; ++t) ids(b, t) = static_cast<float>(seq[static_cast<std::size_t>(t)]);
    logits[b] = attn::attention_only_forward<float>(model, seq);
  }
  course::save_checkpoint(dir, ch.source(), model, [&](course::Dumper& d) {
    d("eval_ids", ids);
    d("eval_logits", logits);
  });
  say_saved(ch, dir);
}

std::string checkpoint_problem(const course::Chapter& ch, const Knobs& k) {
  std::vector<std::string> tasks;
  if (k.task != "induction") tasks.push_back("reversal");
  if (k.task != "reversal") tasks.push_back("induction");
  for (const std::string& task : tasks) {
    if (!k.save.empty()) {
      const std::string problem = course::check_dump_folder(k.save + "/" + task);
      if (!problem.empty()) return "--save: " + problem;
    }
    if (k.load.empty()) continue;
    try {
      // --heads changes no tensor's shape, only how Q, K, V are split: compare it by name.
      const auto recorded = course::checkpoint_options(k.load + "/" + task, ch.name());
      const auto heads = recorded.find("--heads");
      if (heads != recorded.end() && heads->second != std::to_string(k.heads)) {
        return fmt::format("--load: {}/{} was trained with --heads {}, but this run has --heads "
                           "{}: the same weights split into other heads compute another model",
                           k.load, task, heads->second, k.heads);
      }
      attn::Rng rng(0);
      if (task == "reversal") {
        attn::Seq2Seq model = attn::seq2seq_init(rng, reversal_config(k));
        course::load_checkpoint(k.load + "/reversal", ch.name(), model);
      } else {
        attn::AttentionOnly model = attn::attention_only_init(rng, induction_config(k));
        course::load_checkpoint(k.load + "/induction", ch.name(), model);
      }
    } catch (const course::CheckpointError& e) {
      return std::string("--load: ") + e.what();
    }
  }
  return "";
}

}  // namespace training
