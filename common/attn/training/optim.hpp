/// @file
/// The training loop's last three pieces, exactly as PyTorch 1.13 defines them: the Adam / AdamW
/// optimiser, gradient clipping by the global norm, and the two learning-rate schedules.
///
///     AdamOf<T> opt({.lr = ..., .betas = {0.9, 0.98}, .eps = 1e-9, ...});    state for one model
///     opt.set_lr(warmup_inverse_sqrt_lr(step, d_model, warmup));            the schedule, per step
///     clip_grad_norm(attn::parameters(grads), 1.0);                          before the update
///     opt.step(attn::parameters(model), attn::parameters(grads));           p <- p - update
///
/// Both lists are what attn::parameters() makes (parameters.hpp): the model's and its gradient
/// holder's tensors by state_dict key, in named_parameters() order.
///
/// ## Adam and AdamW (torch.optim.Adam, torch.optim.AdamW)
///
/// Per parameter entry p with gradient g, at step t = 1, 2, ... (amsgrad = False,
/// maximize = False, the single-tensor "for" path that 1.13 takes by default):
///
///     Adam (L2):        g  = g + wd p                            grad.add(param, alpha=wd)
///     AdamW (decoupled): p = p (1 - lr wd)                        param.mul_(1 - lr * wd)
///     m   = beta1 m + (1 - beta1) g                               exp_avg
///     v   = beta2 v + (1 - beta2) g^2                             exp_avg_sq
///     bc1 = 1 - beta1^t,  bc2 = 1 - beta2^t                       bias corrections
///     p   = p - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
///
/// m and v start at 0 and so are biased towards 0 in the first steps; dividing by bc1 and bc2
/// removes that bias (the Adam paper, section 3). On step 1, m / bc1 = g and v / bc2 = g^2, so
/// the update is lr g / (|g| + eps): lr sign(g) wherever |g| >> eps, whatever g's size.
///
/// eps sits OUTSIDE the square root and is added after dividing sqrt(v) by sqrt(bc2), as torch
/// writes it; the paper's sqrt(v_hat) + eps, with v_hat = v / bc2, is the same thing. (eps
/// inside the root, sqrt(v_hat + eps), is a different optimiser: with eps = 1e-9 an entry whose
/// gradient is 1e-6 then moves by lr / 30 instead of lr.) eps = 0 is accepted, as torch
/// accepts it; then an entry whose gradient has been exactly 0 since the first step divides
/// 0 by 0 and becomes NaN.
///
/// L2 weight decay (Adam) adds wd p to the gradient, so it too is divided by sqrt(v): a
/// parameter with large gradients is barely decayed. Decoupled decay (AdamW, Loshchilov and
/// Hutter) shrinks p by the factor 1 - lr wd before the Adam step, the same for every entry,
/// with the learning rate of this step. torch.optim.AdamW's default weight_decay is 1e-2 and
/// Adam's is 0; here the default is 0 for both, so an AdamW says its decay.
///
/// ### Precision: the same operations as torch, in the same order
///
/// The state (m, v) is kept in T, as torch keeps float32 state for float32 parameters, and the
/// hyper-parameters are doubles, as torch's are Python floats. bc1, bc2, lr / bc1, sqrt(bc2)
/// and 1 - lr wd are computed in double and each rounded to T where torch hands it to a kernel
/// as a scalar; then every entry goes through the kernels' own arithmetic:
///
///     g = fma(p, T(wd), g)                        add(alpha): Vectorized fmadd, one rounding
///     m = fma(g, T(1 - beta1), m * T(beta1))      mul_ then add_(alpha)
///     v = fma(T(1 - beta2) * g, g, v * T(beta2))  mul_ then addcmul_: (value * g) * g + v
///     d = sqrt(v) / T(sqrt(bc2)) + T(eps)         sqrt, div by a scalar (a true division), add_
///     p = p + (T(-lr / bc1) * m) / d              addcdiv_: (value * m) / d + p
///
/// The two fused multiply-adds are what torch's CPU kernels compute on any x86-64 machine with
/// AVX2 (their vector loop calls fmadd, and the scalar tail is compiled with FMA contraction):
/// with them the float results are bit-identical to torch 1.13 on such a machine
/// (tests/attn/training/test_optim.cpp); without them they would differ by an ulp of m or v now and
/// then.
///
/// ### The step count, the learning rate, and the parameter list
///
/// torch keeps a step count per parameter; so does the state here (AdamStateOf::step), and
/// every step advances all of them, since every parameter has a gradient (a zero gradient is
/// still a step, as a zeroed .grad is in torch; only a .grad of None is skipped there).
///
/// The learning rate is options().lr until set_lr() changes it: a schedule calls
/// set_lr(f(step)) before each step(), as torch's LambdaLR writes param_group['lr'] before
/// optimizer.step() reads it. Only lr can change; betas, eps and the decay are fixed for the
/// optimiser's life.
///
/// The first step() sizes the state from the parameter list; every step() checks that the
/// parameters and gradients have the same keys, blocks, shapes and order, and that the list is
/// the one of the first step, before it changes anything, and throws std::invalid_argument
/// naming the first key that differs. A gradient that shares memory with any parameter is
/// refused too: the model's own tensors (attn::parameters(model) passed twice), or another
/// parameter's (a list of views made by hand), which the update would move while the gradient
/// is still to be read.
///
/// ## clip_grad_norm (torch.nn.utils.clip_grad_norm_, norm_type = 2)
///
///     total = sqrt(sum over every entry of every gradient of g^2)    one vector, all tensors
///     coef  = min(1, max_norm / (total + 1e-6))
///     g     = g * coef                                              every gradient, always
///
/// Clipping the norm of the whole gradient, not of each tensor, keeps its direction: a step
/// that would be too long is shortened, not turned. The 1e-6 keeps the division finite for a
/// zero gradient and makes a clipped norm land just below max_norm. torch multiplies by coef
/// even when it is 1 (to avoid a device sync), and so does this: multiplying by 1 changes no
/// bit. Its coef is computed as a tensor would: reciprocal(total + 1e-6) * max_norm, in T,
/// which is not always the same float as max_norm / (total + 1e-6); this does the same.
///
/// The total is summed in double and rounded once to T: for float gradients the correctly
/// rounded norm, where torch sums in float32 (per-tensor norms, then the norm of those) and was
/// measured up to 3 ulps away on 2000 random gradient sets (on the fixture's, the same float).
/// One real difference: float
/// gradients around 1e19 or larger overflow torch's float32 sum of squares, which returns inf
/// and zeroes every gradient; here the norm is finite (while it fits in a float) and the
/// gradients are scaled properly.
///
/// A non-finite total is returned as it is, for the training loop to report, and the gradients
/// are then multiplied as torch multiplies them (error_if_nonfinite = False): by NaN when the
/// total is NaN (every gradient becomes NaN), by 0 when it is inf (finite entries become 0,
/// infinite ones NaN). Either way the step must be skipped.
///
/// ## Learning-rate schedules
///
/// Plain functions of the step, 1-based: the step about to be taken, as Adam's t. A PyTorch
/// scheduler counts from 0 (last_epoch) and is stepped after optimizer.step(), so the lr that
/// optimizer step t uses comes from scheduler epoch t - 1; the equivalents below account for it.
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/parameters.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

/// How weight_decay acts: the one difference between torch.optim.Adam and torch.optim.AdamW.
enum class WeightDecay {
  l2,         ///< Adam: g += wd p before the moments (the decay is rescaled with the gradient)
  decoupled,  ///< AdamW: p *= 1 - lr wd before the update (the same shrink for every entry)
};

/// The exponential decay rates of the moments: torch's betas=(beta1, beta2).
struct AdamBetas {
  double beta1 = 0.9;    ///< of m, the mean of the gradient
  double beta2 = 0.999;  ///< of v, the mean of its square
};

/// torch.optim.Adam's arguments and defaults, plus which decay (AdamW = decoupled). Checked by
/// the constructor: lr >= 0 and finite, 0 <= beta < 1, eps >= 0 and finite, weight_decay >= 0
/// and finite. The paper trains with {.lr = schedule, .betas = {0.9, 0.98}, .eps = 1e-9}.
struct AdamOptions {
  double lr = 1e-3;         ///< until set_lr() changes it
  AdamBetas betas{};        ///< (0.9, 0.999)
  double eps = 1e-8;        ///< added to sqrt(v) / sqrt(bc2), outside the root
  double weight_decay = 0;  ///< torch.optim.AdamW's default is 1e-2: say it
  WeightDecay decay = WeightDecay::l2;
};

/// What Adam keeps for one entry of the parameter list (torch's optimizer.state[p]).
template <Real T>
struct AdamStateOf {
  std::string key;         ///< the parameter's state_dict key
  Index first = 0;         ///< its block within the key (parameters.hpp)
  MatrixOf<T> exp_avg;     ///< m, the parameter's shape, in T
  MatrixOf<T> exp_avg_sq;  ///< v, the parameter's shape, in T
  std::int64_t step = 0;   ///< steps taken with this parameter: t of the last update
};

/// Adam or AdamW over the tensors of one model. T is float (as PyTorch trains) or double.
template <Real T>
class AdamOf {
 public:
  using Scalar = T;

  /// Throws std::invalid_argument naming the option that is out of range.
  explicit AdamOf(const AdamOptions& options = {});

  /// One update of every parameter from its gradient, with the current lr (above). params and
  /// grads come from attn::parameters(model) and attn::parameters(grads) (a const gradient
  /// holder is fine). Throws std::invalid_argument, before changing anything, when the two
  /// lists differ in a key, block, shape or length, when the list is not the first step's, or
  /// when a gradient shares memory with any parameter (its own or another's), or for a negative
  /// `threads`. The entries are shared out among `threads` (0: the default, threads.hpp, when
  /// the update is worth a parallel region); each entry's update is its own, so the count
  /// changes no bit.
  void step(const std::vector<Parameter<T>>& params, const std::vector<Parameter<T>>& grads,
            int threads = 0);
  void step(const std::vector<Parameter<T>>& params, const std::vector<Parameter<const T>>& grads,
            int threads = 0);

  /// The learning rate of the next step() and the ones after it (param_group['lr'] = lr).
  /// Throws std::invalid_argument unless lr >= 0 and finite.
  void set_lr(double lr);
  double lr() const { return options_.lr; }

  const AdamOptions& options() const { return options_; }
  /// Steps taken so far: t of the last update, 0 before the first.
  std::int64_t steps() const { return steps_; }
  /// One entry per parameter of the list, in its order; empty before the first step().
  const std::vector<AdamStateOf<T>>& state() const { return state_; }
  /// Continues from a saved state() (optimizer.load_state_dict()): the next step() is step
  /// t + 1 of each entry, with its moments, so that saving and restoring between two steps
  /// changes no bit of the run. The next step() checks its lists against the entries' keys,
  /// blocks and shapes, as it checks them against the first step's. Throws
  /// std::invalid_argument, leaving the optimiser as it was, when the entries disagree on the
  /// step count or it is below 1, when an entry's two moments differ in shape, or when a moment
  /// is not finite or a second moment is negative (no run of Adam makes those).
  void restore(std::vector<AdamStateOf<T>> state);

 private:
  template <typename G>
  void step_impl(const std::vector<Parameter<T>>& params, const std::vector<Parameter<G>>& grads,
                 int threads);

  AdamOptions options_;
  std::vector<AdamStateOf<T>> state_;
  std::int64_t steps_ = 0;
};
using Adam = AdamOf<float>;
using AdamD = AdamOf<double>;

/// Scales every gradient so that their global 2-norm is at most max_norm, as
/// torch.nn.utils.clip_grad_norm_(params, max_norm) (norm_type 2, error_if_nonfinite False), and
/// returns the norm before clipping (0 for an empty list, which is left alone). Throws
/// std::invalid_argument unless max_norm is positive and finite (not clipping means not
/// calling it). A non-finite norm is returned as it is; the gradients are then NaN or 0 (above).
/// The norm is one sum in a fixed order; the scaling is shared out among `threads` (0: the
/// default, threads.hpp), entry by entry, so the count changes no bit.
template <Real T>
T clip_grad_norm(const std::vector<Parameter<T>>& grads, double max_norm, int threads = 0);

/// The paper's schedule (Attention Is All You Need, section 5.3), times `factor`:
///
///     lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
///
/// linear growth for the first `warmup` steps, up to factor / sqrt(d_model * warmup) at
/// step = warmup, then decay as 1 / sqrt(step). PyTorch: LambdaLR(Adam(lr=1.0), lambda e:
/// lr(e + 1)) gives optimiser step t exactly this double (Adam(lr=c) with factor 1 gives
/// c * lr(t), which is this function with factor = c, to the bit); the + 1 is needed because
/// LambdaLR starts at epoch 0, where step^-0.5 would divide by zero. The Annotated Transformer
/// writes the same lambda as `rate(step + 1, ...)` with factor 1 or 2. Computed in that order:
/// factor * (d_model^-0.5 * min(...)). Throws std::invalid_argument unless step, d_model and
/// warmup are at least 1 and factor is positive and finite.
double warmup_inverse_sqrt_lr(std::int64_t step, Index d_model, std::int64_t warmup,
                              double factor = 1.0);

/// Linear warm-up, then a cosine decay:
///
///     step <= warmup:           lr = base_lr * step / warmup          base_lr / warmup, ...,
///     base_lr warmup < step < total:    lr = min_lr + (base_lr - min_lr) (1 + cos(pi k / K)) / 2
///                                    with k = step - warmup, K = total_steps - warmup
///     step >= total_steps:      lr = min_lr
///
/// The peak base_lr is reached at step = warmup and min_lr at step = total_steps. PyTorch,
/// with Adam(lr=base_lr), stepping the scheduler after each optimizer step:
///
///     SequentialLR(opt, [LinearLR(opt, start_factor=1/warmup, end_factor=1,
///                                 total_iters=warmup - 1),
///                        CosineAnnealingLR(opt, T_max=total_steps - warmup, eta_min=min_lr)],
///                  milestones=[warmup - 1])
///
/// gives the same lrs for steps 1 .. total_steps to within 3e-16 relative (its LinearLR and
/// CosineAnnealingLR update the lr recursively, lr_e from lr_{e-1}, and round differently from
/// this closed form). The off-by-ones matter: the obvious total_iters=warmup, milestones=[warmup]
/// does not ramp linearly (step 2 gets base_lr (1/w + (1 - 1/w)/w), not 2 base_lr / w) and
/// reaches base_lr one step late, at warmup + 1. After total_steps torch's cosine is periodic
/// and climbs back towards base_lr; this holds min_lr instead. (warmup = 1 starts at base_lr;
/// torch's LinearLR cannot express that, total_iters = 0, and there the cosine alone does.)
/// Throws std::invalid_argument unless step >= 1, 1 <= warmup <= total_steps, and
/// 0 <= min_lr <= base_lr, both finite.
double warmup_cosine_lr(std::int64_t step, double base_lr, std::int64_t warmup,
                        std::int64_t total_steps, double min_lr = 0.0);

}  // namespace attn
