// optim.cpp: Adam / AdamW, clip_grad_norm and the learning-rate schedules, as PyTorch 1.13
// computes them (optim.hpp has the formulas and the order of operations).
#include "attn/training/optim.hpp"

#include "attn/core/memory.hpp"
#include "attn/core/threads.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

namespace attn {

namespace {

// Entries an update's task holds: enough to pay for its scheduling, few enough that the
// largest tensor is shared out among the threads.
constexpr Index kAdamChunk = 16384;
// About what one entry of Adam's update costs in flops (a square root and a division among
// them): what a parallel region weighs the update by (threads.hpp).
constexpr double kAdamFlopsPerEntry = 12.0;

/// The shortest text that reads back as x ("1e-09", "0.98", "nan"), for messages.
std::string number(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

void check_options(const AdamOptions& o) {
  const char* where = "Adam";
  require(std::isfinite(o.lr) && o.lr >= 0.0, where,
          [&] { return "lr is " + number(o.lr) + ": it must be >= 0 and finite"; });
  require(o.betas.beta1 >= 0.0 && o.betas.beta1 < 1.0, where,
          [&] { return "beta1 is " + number(o.betas.beta1) + ": it must be in [0, 1)"; });
  require(o.betas.beta2 >= 0.0 && o.betas.beta2 < 1.0, where,
          [&] { return "beta2 is " + number(o.betas.beta2) + ": it must be in [0, 1)"; });
  require(std::isfinite(o.eps) && o.eps >= 0.0, where,
          [&] { return "eps is " + number(o.eps) + ": it must be >= 0 and finite"; });
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0.0, where, [&] {
    return "weight_decay is " + number(o.weight_decay) + ": it must be >= 0 and finite";
  });
  require(o.decay == WeightDecay::l2 || o.decay == WeightDecay::decoupled, where,
          "decay is neither WeightDecay::l2 nor WeightDecay::decoupled");
}

/// "\"linear1.bias\" [1 x 8]", with the block's first row or element when it is not 0
/// (in_proj_weight is visited as three blocks of one key).
std::string describe(const std::string& key, Index first, Index rows, Index cols) {
  std::string s = "\"" + key + "\"";
  if (first != 0) s += " (block from " + std::to_string(first) + ")";
  return s + " " + shape_str(rows, cols);
}

template <typename P>
std::string describe(const P& p) {
  return describe(p.key, p.first, p.value.rows(), p.value.cols());
}

}  // namespace

template <Real T>
AdamOf<T>::AdamOf(const AdamOptions& options) : options_(options) {
  check_options(options_);
}

template <Real T>
void AdamOf<T>::set_lr(double lr) {
  require(std::isfinite(lr) && lr >= 0.0, "Adam::set_lr",
          [&] { return "lr is " + number(lr) + ": it must be >= 0 and finite"; });
  options_.lr = lr;
}

template <Real T>
void AdamOf<T>::restore(std::vector<AdamStateOf<T>> state) {
  const char* where = "Adam::restore";
  const std::int64_t t = state.empty() ? 0 : state.front().step;
  for (const AdamStateOf<T>& s : state) {
    const std::string name = describe(s.key, s.first, s.exp_avg.rows(), s.exp_avg.cols());
    require(s.step == t && t >= 1, where, [&] {
      return name + " has taken " + std::to_string(s.step) + " steps, the first entry " +
             std::to_string(t) + ": every entry of a saved state has the same count, at least 1";
    });
    require(s.exp_avg_sq.rows() == s.exp_avg.rows() && s.exp_avg_sq.cols() == s.exp_avg.cols(),
            where, [&] {
              return name + ": exp_avg_sq is " + shape_str(s.exp_avg_sq) +
                     ": both moments have the parameter's shape";
            });
    require(s.exp_avg.allFinite() && s.exp_avg_sq.allFinite() && (s.exp_avg_sq.array() >= 0).all(),
            where, [&] {
              return name + ": a moment is not finite, or a second moment is negative: not a "
                            "state Adam makes";
            });
  }
  state_ = std::move(state);
  steps_ = t;
}

template <Real T>
void AdamOf<T>::step(const std::vector<Parameter<T>>& params,
                     const std::vector<Parameter<T>>& grads, int threads) {
  step_impl(params, grads, threads);
}

template <Real T>
void AdamOf<T>::step(const std::vector<Parameter<T>>& params,
                     const std::vector<Parameter<const T>>& grads, int threads) {
  step_impl(params, grads, threads);
}

template <Real T>
template <typename G>
void AdamOf<T>::step_impl(const std::vector<Parameter<T>>& params,
                          const std::vector<Parameter<G>>& grads, int threads) {
  const char* where = "Adam::step";
  require(threads >= 0, where, [&] {
    return "threads is " + std::to_string(threads) + ": it must be >= 0 (0: default_threads())";
  });
  // ---- Every check before the first change: a refused step leaves model and state as they were.
  require(params.size() == grads.size(), where, [&] {
    return std::to_string(params.size()) + " parameters but " + std::to_string(grads.size()) +
           " gradients: build both lists with attn::parameters(), from the model and from its "
           "gradients";
  });
  require(state_.empty() || state_.size() == params.size(), where, [&] {
    return std::to_string(params.size()) + " parameters, but the first step had " +
           std::to_string(state_.size()) + ": an optimiser's state belongs to one model";
  });
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    const auto& g = grads[i];
    require(g.key == p.key && g.first == p.first && g.value.rows() == p.value.rows() &&
                g.value.cols() == p.value.cols(),
            where, [&] {
              return "gradient " + std::to_string(i) + " is " + describe(g) + " but parameter " +
                     std::to_string(i) + " is " + describe(p) +
                     ": the two lists must have the same keys, shapes and order";
            });
    if (!state_.empty()) {
      const auto& s = state_[i];
      require(s.key == p.key && s.first == p.first && s.exp_avg.rows() == p.value.rows() &&
                  s.exp_avg.cols() == p.value.cols(),
              where, [&] {
                return "parameter " + std::to_string(i) + " is " + describe(p) + " but it was " +
                       describe(s.key, s.first, s.exp_avg.rows(), s.exp_avg.cols()) +
                       " at the first step: an optimiser's state belongs to one model";
              });
    }
  }

  // No gradient may share memory with any parameter: not its own (the model passed twice), and
  // not another's (a gradient list made of a model's views), or the update would move a
  // gradient it has still to read.
  std::vector<MemoryRange> param_memory, grad_memory;
  param_memory.reserve(params.size());
  grad_memory.reserve(grads.size());
  for (const auto& p : params) param_memory.push_back(memory_of(p.value));
  for (const auto& g : grads) grad_memory.push_back(memory_of(g.value));
  const auto shared = first_overlap(grad_memory, param_memory);
  require(!shared, where, [&] {
    const auto [gi, pi] = *shared;
    const std::string whose =
        gi == pi ? "the parameter's own memory"
                 : "memory of parameter " + std::to_string(pi) + " " + describe(params[pi]);
    return "gradient " + std::to_string(gi) + " " + describe(grads[gi]) + " is " + whose +
           ": pass attn::parameters(grads), not the model twice";
  });

  if (state_.empty()) {
    state_.reserve(params.size());
    for (const auto& p : params) {
      const Index r = p.value.rows(), c = p.value.cols();
      state_.push_back({p.key, p.first, MatrixOf<T>::Zero(r, c), MatrixOf<T>::Zero(r, c), 0});
    }
  }

  // ---- The update. Scalars as torch's Python code computes them, in double, then each rounded
  // to T where a kernel receives it; per entry the kernels' own operations (optim.hpp).
  const double lr = options_.lr;
  const double beta1 = options_.betas.beta1, beta2 = options_.betas.beta2;
  const double wd = options_.weight_decay;
  const bool l2 = options_.decay == WeightDecay::l2;
  const T beta1_t = static_cast<T>(beta1), one_minus_beta1 = static_cast<T>(1.0 - beta1);
  const T beta2_t = static_cast<T>(beta2), one_minus_beta2 = static_cast<T>(1.0 - beta2);
  const T eps = static_cast<T>(options_.eps);
  const T wd_t = static_cast<T>(wd);
  const T shrink = static_cast<T>(1.0 - lr * wd);  // AdamW: param.mul_(1 - lr * weight_decay)

  // Each tensor's scalars first, in order; then the entries, cut into chunks of kChunk that
  // run on `team` threads. An entry's update reads and writes that entry alone, so the threads
  // change who updates it, never a bit of the result.
  struct Tensor {
    T* p;
    const T* g;
    T* m;
    T* v;
    Index n;
    T neg_step_size, bc2_sqrt;
  };
  std::vector<Tensor> tensors;
  tensors.reserve(params.size());
  std::vector<std::pair<std::size_t, Index>> chunks;  // (tensor, first entry)
  for (std::size_t i = 0; i < params.size(); ++i) {
    AdamStateOf<T>& s = state_[i];
    ++s.step;
    const double t = static_cast<double>(s.step);  // torch: step_t.item(), a float
    const double bias_correction1 = 1.0 - std::pow(beta1, t);
    const double bias_correction2 = 1.0 - std::pow(beta2, t);
    auto pv = params[i].value;  // a copy of the Map: writable through a const list
    tensors.push_back({pv.data(), grads[i].value.data(), s.exp_avg.data(), s.exp_avg_sq.data(),
                       pv.size(), static_cast<T>(-(lr / bias_correction1)),
                       static_cast<T>(std::sqrt(bias_correction2))});
    for (Index k = 0; k < pv.size(); k += kAdamChunk) chunks.emplace_back(i, k);
  }
  const auto tasks = static_cast<Index>(chunks.size());
  Index entries = 0;
  for (const Tensor& x : tensors) entries += x.n;
  const int team = team_for(threads, tasks, kAdamFlopsPerEntry * static_cast<double>(entries));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index c = 0; c < tasks; ++c) {
    const auto [i, first] = chunks[static_cast<std::size_t>(c)];
    const Tensor& x = tensors[i];
    T* __restrict p = x.p;
    const T* __restrict g_in = x.g;
    T* __restrict m = x.m;
    T* __restrict v = x.v;
    const T neg_step_size = x.neg_step_size, bc2_sqrt = x.bc2_sqrt;
    const Index last = std::min(x.n, first + kAdamChunk);
    // One entry's update; `decay` is a constant in each loop below, so that the compiler keeps no
    // branch inside it and runs the loop in vectors (the same operations, entry by entry).
    const auto update = [&](Index k, bool decay_grad, bool decay_param) {
      T g = g_in[k];
      if (decay_grad) g = std::fma(p[k], wd_t, g);              // grad.add(param, alpha=wd)
      if (decay_param) p[k] = p[k] * shrink;                    // param.mul_(1 - lr * wd)
      m[k] = std::fma(g, one_minus_beta1, m[k] * beta1_t);      // mul_(b1).add_(g, alpha=1-b1)
      v[k] = std::fma(one_minus_beta2 * g, g, v[k] * beta2_t);  // mul_(b2).addcmul_(g, g, 1-b2)
      const T denom = std::sqrt(v[k]) / bc2_sqrt + eps;         // (v.sqrt() / bc2_sqrt).add_(eps)
      p[k] = p[k] + (neg_step_size * m[k]) / denom;             // addcdiv_(m, denom, -step_size)
    };
    if (!l2) {
      // AdamW multiplies by (1 - lr wd) always: torch does not test wd.
      for (Index k = first; k < last; ++k) update(k, false, true);
    } else if (wd != 0.0) {
      for (Index k = first; k < last; ++k) update(k, true, false);
    } else {
      for (Index k = first; k < last; ++k) update(k, false, false);
    }
  }
  ++steps_;
}

template <Real T>
T clip_grad_norm(const std::vector<Parameter<T>>& grads, double max_norm, int threads) {
  require(std::isfinite(max_norm) && max_norm > 0.0, "clip_grad_norm",
          [&] { return "max_norm is " + number(max_norm) + ": it must be positive and finite"; });
  require(threads >= 0, "clip_grad_norm", [&] {
    return "threads is " + std::to_string(threads) + ": it must be >= 0 (0: default_threads())";
  });
  if (grads.empty()) return T(0);  // torch returns tensor(0.) and touches nothing
  double sum = 0.0;
  for (const auto& g : grads) {
    const T* x = g.value.data();
    for (Index k = 0; k < g.value.size(); ++k) {
      const double d = static_cast<double>(x[k]);
      sum += d * d;
    }
  }
  const T total = static_cast<T>(std::sqrt(sum));
  // clip_coef = max_norm / (total_norm + 1e-6) on a tensor is reciprocal(total + 1e-6) * max_norm;
  // clamp(max=1) keeps a NaN, and so does std::min with the NaN first.
  const T coef = std::min(T(1) / (total + static_cast<T>(1e-6)) * static_cast<T>(max_norm), T(1));
  // torch multiplies even when coef is 1. Entry by entry: any number of threads, the same bits.
  std::vector<std::pair<T*, Index>> chunks;  // (first entry, entries)
  Index entries = 0;
  for (const auto& g : grads) {
    auto gv = g.value;  // writable copy of the Map
    for (Index k = 0; k < gv.size(); k += kAdamChunk) {
      chunks.emplace_back(gv.data() + k, std::min(kAdamChunk, gv.size() - k));
    }
    entries += gv.size();
  }
  const auto tasks = static_cast<Index>(chunks.size());
  const int team = team_for(threads, tasks, static_cast<double>(entries));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (Index c = 0; c < tasks; ++c) {
    const auto [x, n] = chunks[static_cast<std::size_t>(c)];
    for (Index k = 0; k < n; ++k) x[k] *= coef;
  }
  return total;
}

double warmup_inverse_sqrt_lr(std::int64_t step, Index d_model, std::int64_t warmup,
                              double factor) {
  const char* where = "warmup_inverse_sqrt_lr";
  require(step >= 1, where, [&] {
    return "step is " + std::to_string(step) + ": steps count from 1 (the step about to be taken)";
  });
  require_at_least_one(d_model, where, "d_model");
  require(warmup >= 1, where,
          [&] { return "warmup is " + std::to_string(warmup) + ": it must be at least 1"; });
  require(std::isfinite(factor) && factor > 0.0, where,
          [&] { return "factor is " + number(factor) + ": it must be positive and finite"; });
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(warmup);
  // The Annotated Transformer's rate(): factor * (model_size ** (-0.5) * min(step ** (-0.5),
  // step * warmup ** (-1.5))), the same pow() calls in the same order.
  const double shape = std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
  return factor * (std::pow(static_cast<double>(d_model), -0.5) * shape);
}

double warmup_cosine_lr(std::int64_t step, double base_lr, std::int64_t warmup,
                        std::int64_t total_steps, double min_lr) {
  const char* where = "warmup_cosine_lr";
  require(step >= 1, where, [&] {
    return "step is " + std::to_string(step) + ": steps count from 1 (the step about to be taken)";
  });
  require(warmup >= 1 && warmup <= total_steps, where, [&] {
    return "warmup is " + std::to_string(warmup) + " and total_steps " +
           std::to_string(total_steps) + ": it must be 1 <= warmup <= total_steps";
  });
  require(std::isfinite(base_lr) && std::isfinite(min_lr) && min_lr >= 0.0 && min_lr <= base_lr,
          where, [&] {
            return "base_lr is " + number(base_lr) + " and min_lr " + number(min_lr) +
                   ": it must be 0 <= min_lr <= base_lr, both finite";
          });
  if (step <= warmup) {
    return base_lr * static_cast<double>(step) / static_cast<double>(warmup);
  }
  if (step >= total_steps) return min_lr;
  const double k = static_cast<double>(step - warmup);
  const double K = static_cast<double>(total_steps - warmup);
  // CosineAnnealingLR's closed form: eta_min + (base_lr - eta_min) * (1 + cos(pi * e / T_max)) / 2
  return min_lr + (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * k / K)) / 2.0;
}

template class AdamOf<float>;
template class AdamOf<double>;
template float clip_grad_norm(const std::vector<Parameter<float>>&, double, int);
template double clip_grad_norm(const std::vector<Parameter<double>>&, double, int);

}  // namespace attn
