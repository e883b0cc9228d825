/// @file
/// The gradient check: does every backward pass compute the derivative of its forward? Each
/// gradient a backward pass returns (the "analytic" one) is compared with a numeric one made by
/// central differences of the forward alone, in double, the way torch.autograd.gradcheck works.
/// The training chapter prints one line per layer from check_all_layers(); the tests hold every
/// layer to a relative error of 1e-6.
///
/// ## What is differentiated
///
/// A backward pass maps dL/d(out) to the gradients of the inputs and the parameters, for any
/// scalar L. The check makes one:
///
///     L = sum(out * R)   (elementwise, summed), R a fixed random matrix of the output's shape
///
/// so dL/d(out) = R is what the backward pass is handed, and no direction of the output is
/// left out (a backward pass fed all ones would never see a transposed output). Softmax
/// cross-entropy is checked on its real loss instead: dL/d(logits) is its d_logits.
///
/// Every layer runs in double (cast<double>(layer), parameters.hpp): the very code that
/// trains in float, instantiated for double, so the check tests that code and not a copy.
///
/// ## Central differences
///
/// For each tensor (every parameter of parameters(layer), every input matrix) and each of its
/// entries e, with everything else fixed:
///
///     h_e     = h max(1, |e|)                                 the step, relative for |e| > 1
///     numeric = (L(e + h_e) - L(e - h_e)) / ((e + h_e) - (e - h_e))
///
/// and e is put back bit for bit afterwards (assigned, not "subtracted back"). The denominator
/// is the difference of the two values actually stored, not 2 h_e: e + h_e rounds, and dividing
/// by the step that was really taken removes that error.
///
/// Two errors compete (Taylor: L(e +- h) = L +- h L' + h^2 L''/2 +- h^3 L'''/6 + ...):
///   truncation  h^2 |L'''| / 6           the even terms cancel, the cubic one does not
///   rounding    ~ eps |L| / h            L is computed to a few eps = 2.2e-16 relative, and
///                                        the difference of two nearly equal values divides
///                                        that absolute error by 2h
/// With |L| ~ 10 and |L'''| ~ 1 they are equal near h = (3 eps |L| / |L'''|)^(1/3) ~ 2e-5, and
/// both are then ~1e-10. Measured over every tensor of every layer of check_all_layers (seed 1),
/// the worst relative error is
///
///     h       1e-2    1e-3   1e-4   3e-5   1e-5   1e-6   1e-7   1e-8   1e-10
///     worst   1.3e-1  8e-7   8e-9   6e-9   2e-8   2e-7   8e-7   8e-6   2e-3
///
/// the truncation error falling as h^2 down to h ~ 3e-5, then the rounding error rising as 1/h:
/// the V of every finite-difference plot (tests/attn/training/test_gradient_check.cpp checks both
/// slopes). At 1e-2 a step reaches the ReLU margin below and crosses kinks (the FFN, and the
/// post-norm encoder and decoder layers of this seed; every other layer gives <= 8e-5, truncation;
/// at 1e-3 and 1e-4 the worst is grouped-query attention's, its RoPE'd scores the most curved).
/// At h = kGradientCheckStep = 1e-5 the 2e-8 is the attention key bias, a gradient of exactly 0
/// measured as noise (below); every tensor with a gradient far from zero is within about 2e-9 (4e-8
/// for one whose scale sits just above the floor). 1e-5 rather than the flat bottom at 3e-5 to
/// 1e-4: there the truncation error is already the larger one, and it grows with the curvature of
/// whatever layer is checked next; and a step 1000 times smaller than the ReLU margin leaves the
/// kinks alone.
///
/// ## The error of a tensor
///
///     max_abs_error = max over its entries |analytic - numeric|
///     scale         = max over its entries |numeric|
///     relative      = max_abs_error / max(scale, floor)
///
/// An entry-wise relative error |a - n| / |n| is meaningless where the gradient is exactly 0,
/// and it is, by design, in many places: a key blocked by a mask, a query with no allowed key,
/// an embedding row that no id uses, a padding position of the loss. So the error is measured
/// against the tensor's own scale. That still fails for a tensor whose whole gradient is 0: the
/// key bias of attention (adding b to every key adds the same number to every score of a row,
/// and softmax does not change), where the numeric gradient is pure rounding noise of
/// ~eps |L| / h (measured 1e-11 to 2e-10) and the analytic one ~1e-17: a "relative error" of
/// exactly 1 between two zeros. Central differences resolve a gradient to an absolute ~1e-10,
/// not to a fraction of itself; hence a floor: within a GradientReport, every tensor is measured
/// against at least kScaleFloorFraction = 1e-3 of the largest scale of the report
/// (GradientReport::add keeps it up to date). A tensor whose gradient is a thousandth of the
/// layer's or less is then checked to 1e-9 of the layer's gradients in absolute terms, every
/// other one to 1e-6 of its own.
///
/// ## Kinks and masks
///
/// Central differences assume L is smooth within h_e of e. ReLU is not at 0: if a pre-activation
/// lies within about h_e |d pre / d e| of 0, one side of the difference sees the slope and the
/// other does not, and the numeric derivative is the mean of the two one-sided slopes, which
/// neither analytic answer (ReLU' = 1 or 0) is: the check fails (a test shows it). The
/// cases of check_all_layers are therefore drawn so that every ReLU input is at least
/// kReluMargin = 1e-2 from 0: a whole case is redrawn from the same generator until it is,
/// which keeps the run deterministic for a seed. 1e-2 is 1000 h: no single entry moves a
/// pre-activation that far unless its derivative is ~1000, far beyond these layers'.
///
/// The other non-smooth places are exact. A blocked score is replaced by -inf whatever it was,
/// so moving a blocked key's row of K changes L by exactly 0, and its numeric gradient is
/// exactly 0, as the analytic one (its weight is 0, hence its dS). A query with no allowed key
/// has an output written as zeros: again exactly 0 both ways. The attention cases check both.
///
/// ## Use
///
///     GradientReport report{"linear", {}};
///     report.add(check_tensor("x", x, dx, loss));            // perturbs x in place, restores it
///     check_parameters(report, layer_d, grads, loss);       // every tensor of parameters(layer_d)
///     report.worst();                                       // <= 1e-6, or a backward pass is
///     wrong
///
/// where `loss` is a std::function<double()> that runs the forward on the current values
/// (layer_d and x, captured by reference) and returns L. check_all_layers(seed) does this for
/// every layer of the course on small random cases (n = 4 to 6, d_model = 8, 2 heads,
/// d_ff = 16: 4694 entries in the single layers of chapter 09 and 256 in grouped-query
/// attention, two forwards each, about 20 ms in a release build).
#pragma once

#include "attn/core/matrix.hpp"
#include "attn/layers/parameters.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn {

/// h, relative to max(1, |e|): where truncation (h^2) and rounding (1/h) meet (above).
inline constexpr double kGradientCheckStep = 1e-5;
/// The bar every tensor of every layer meets (tests): a backward pass that is right gives
/// 1e-11 to 2e-9 (double, h = 1e-5, these small well-conditioned cases), 2e-8 for a gradient of
/// exactly 0 measured against the floor; a wrong one gives 1e-3 and more (a planted error of
/// 1e-3 of the scale in one entry reads 1e-3). 1e-6 is orders of magnitude from both.
inline constexpr double kGradientCheckTolerance = 1e-6;
/// The least scale a tensor's error is divided by, as a fraction of its report's largest.
inline constexpr double kScaleFloorFraction = 1e-3;
/// How far from 0 every ReLU input of check_all_layers' cases is drawn.
inline constexpr double kReluMargin = 1e-2;

/// The scalar being differentiated, evaluated on the current values of what is perturbed.
using LossFunction = std::function<double()>;

/// One tensor's check: how far the analytic gradient is from the numeric one.
struct TensorCheck {
  std::string name;          ///< "x", "self_attn.in_proj_weight[8:16]", "linear1.bias", ...
  Index entries = 0;         ///< how many entries were perturbed (the tensor's size)
  double max_abs_error = 0;  ///< max |analytic - numeric| over the entries (NaN if any is NaN)
  double scale = 0;          ///< max |numeric| over the entries: the tensor's gradient scale
  double floor = 0;          ///< the least scale divided by (set by GradientReport::add)

  /// max_abs_error / max(scale, floor): 0 for a gradient that is exactly right, NaN if either
  /// gradient held a NaN. A tensor of exact zeros both ways (scale and floor 0) gives 0.
  double relative_error() const;
};

/// All tensors of one layer's check, under the name the training chapter prints.
struct GradientReport {
  std::string layer;                 ///< "linear", "encoder layer, pre-norm", ...
  std::vector<TensorCheck> tensors;  ///< in the order checked: inputs, then parameters

  /// Appends `check` and sets every tensor's floor to kScaleFloorFraction x the largest scale
  /// of the report (above: a tensor whose gradient is exactly 0 is not "100% wrong").
  void add(TensorCheck check);
  /// The largest relative error of any tensor; NaN if any is NaN; 0 for an empty report.
  double worst() const;
  /// The tensor with that error (the first NaN if any). Throws std::invalid_argument when the
  /// report is empty.
  const TensorCheck& worst_tensor() const;
};

/// The numeric gradient dL/d(value) [rows x cols] by central differences (above), perturbing
/// every entry of `value` in place and calling `loss` twice per entry. `value` is restored bit
/// for bit, even when `loss` throws. Throws std::invalid_argument unless step is finite and > 0.
MatrixD numeric_gradient(Eigen::Ref<MatrixD> value, const LossFunction& loss,
                         double step = kGradientCheckStep);

/// The comparison alone: max |analytic - numeric|, max |numeric| (floor 0). Throws
/// std::invalid_argument naming both shapes unless they agree.
TensorCheck compare_gradients(std::string name, const MatrixViewD& analytic,
                              const MatrixViewD& numeric);

/// numeric_gradient of `value`, compared with `analytic` (value's shape, checked first).
/// Throws std::invalid_argument when they share memory: perturbing value would move analytic.
TensorCheck check_tensor(std::string name, Eigen::Ref<MatrixD> value, const MatrixViewD& analytic,
                         const LossFunction& loss, double step = kGradientCheckStep);

/// "in_proj_weight[8:16]" for a block of a stacked key (parameters.hpp: nn.MultiheadAttention's
/// W_K is rows 8 to 16 of in_proj_weight when d_model = 8), the key alone otherwise.
template <typename T>
std::string parameter_name(const Parameter<T>& p, bool stacked) {
  if (!stacked) return p.key;
  const Index size = p.is_vector ? p.value.cols() : p.value.rows();
  return p.key + "[" + std::to_string(p.first) + ":" + std::to_string(p.first + size) + "]";
}

/// Checks every parameter tensor of `layer` against the same tensor of `grads` (what the
/// backward pass accumulated into zeros_like(layer)), walking parameters() of both in step,
/// and adds one TensorCheck per tensor to `report`, named by its state_dict key with `prefix`
/// (and the block of a stacked key). `loss` must read `layer`: it is perturbed in place.
/// Throws std::invalid_argument (check_grads_like) unless grads has layer's structure and
/// memory of its own: the layer passed as its own gradients would compare a perturbed tensor
/// with itself.
template <typename Layer>
void check_parameters(GradientReport& report, Layer& layer, const Layer& grads,
                      const LossFunction& loss, double step = kGradientCheckStep,
                      const std::string& prefix = "") {
  // grads must be a holder of its own: `layer` is perturbed in place, which would move the
  // analytic gradient it is compared with if they shared memory.
  check_grads_like(layer, grads, "check_parameters");
  auto values = parameters(layer, prefix);
  const auto analytic = parameters(grads, prefix);
  require(values.size() == analytic.size(), "check_parameters", [&] {
    return "the layer has " + std::to_string(values.size()) + " tensors but grads has " +
           std::to_string(analytic.size()) + ": pass zeros_like(layer) filled by its backward";
  });
  for (std::size_t i = 0; i < values.size(); ++i) {
    bool stacked = false;
    for (std::size_t j = 0; j < values.size(); ++j) {
      stacked = stacked || (j != i && values[j].key == values[i].key);
    }
    report.add(check_tensor(parameter_name(values[i], stacked), values[i].value, analytic[i].value,
                            loss, step));
  }
}

/// Every layer of the course on small random cases drawn from `seed`, each checked in full
/// (every parameter, every input), one report per line of the training chapter's table:
///
/// linear; layer norm; feed-forward; embedding; attention with a causal mask; attention with
/// padding and a query that may attend to nothing (n_q != n_k, d_v != d_k); multi-head
/// self-attention (causal); multi-head cross-attention (padding, separate key and value);
/// encoder layer post- and pre-norm (padding); decoder layer post- and pre-norm (causal
/// self-attention, padded memory); softmax cross-entropy (an ignored id, label smoothing 0.1);
/// the whole encoder-decoder (post-norm; pre-norm and tied); the attention-only decoder;
/// grouped-query self-attention (chapter 11: 4 query heads over 2 kv heads, RoPE, causal with a
/// sliding window of 3), last so that adding it left every earlier case's draws as they were.
///
/// Sizes: n = 5 (4 queries over 6 keys for cross-attention), d_model = 8, 2 heads (4 over 2 kv
/// heads for grouped-query attention), d_ff = 16,
/// a vocabulary of 7. The layers come from the float *_init functions and cast<double>; every
/// bias, LayerNorm gamma and beta is then moved by N(0, 0.2^2), so that no bias is 0 and no gamma
/// 1 (a gradient missing a factor gamma would pass at gamma = 1). Inputs and R are N(0, 1).
std::vector<GradientReport> check_all_layers(std::uint64_t seed, double step = kGradientCheckStep);

}  // namespace attn
