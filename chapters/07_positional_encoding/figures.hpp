// Chapter 07's four figures, laid out from what main.cpp computed.
#pragma once

#include "attn/core/matrix.hpp"
#include "course/plot.hpp"
#include "self_attention.hpp"

#include <string>
#include <vector>

namespace positional {

/// 07_permutation: the weights of "dog bites man" and "man bites dog", without and with PE.
/// Each layer's weights, with its scores before the softmax for the interactive twin.
void draw_permutation(course::Plotter& plot, const SelfAttention& plain_a,
                      const SelfAttention& plain_b, const SelfAttention& pe_a,
                      const SelfAttention& pe_b, const std::vector<std::string>& words_a,
                      const std::vector<std::string>& words_b);

/// 07_encoding: the table PE [P x d_model] as a heat map.
void draw_encoding(course::Plotter& plot, const attn::Matrix& pe);

/// 07_frequencies: columns 2i of `pe` for pairs i at 0, 1/4 and 1/2 of the width, labelled with
/// their frequencies `omega` [d_model/2].
void draw_frequencies(course::Plotter& plot, const attn::Matrix& pe, const attn::VectorD& omega);

/// 07_dot_product: sum_i cos(omega_i k) against k, and PE(0) . PE(k), PE(P-1) . PE(P-1+k).
void draw_dot_product(course::Plotter& plot, const Eigen::VectorXd& dot_by_offset,
                      const Eigen::VectorXf& first, const Eigen::VectorXf& later, attn::Index P,
                      attn::Index d_model);

}  // namespace positional
