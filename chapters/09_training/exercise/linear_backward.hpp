// Exercise 09.2: the backward pass of a linear layer, written by hand. The body is yours to
// write, in linear_backward.cpp beside this file; README.md says how to check it.
#pragma once

#include "attn/core/matrix.hpp"

/// What the backward pass of a linear layer returns: one gradient per input and parameter, each
/// of the shape of what it is the gradient of.
struct ExerciseLinearGradients {
  attn::MatrixD dX;  ///< [n x in]: dL/dX, X's shape
  attn::MatrixD dW;  ///< [out x in]: dL/dW, W's shape (PyTorch's layout)
  attn::MatrixD db;  ///< [1 x out]: dL/db, a row, as the bias is stored
};

/// Difficulty 1 of 3, importance 3 of 3, about 15 minutes.
///
/// The backward pass of Y = X W^T + b, as the chapter's page writes it and attn::LinearD
/// computes it: one token per row, X [n x in], W [out x in] (PyTorch's layout), b [1 x out]
/// added to every row, Y [n x out]. Given dY = dL/dY [n x out], returns
///
///     dX = dY W          [n x in]
///     dW = dY^T X        [out x in]
///     db = sum of dY's rows   [1 x out]
///
/// b does not appear in any of the three, so it is not an argument.
ExerciseLinearGradients exercise_linear_backward(const attn::MatrixD& X, const attn::MatrixD& W,
                                                 const attn::MatrixD& dY);
