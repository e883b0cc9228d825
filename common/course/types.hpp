/// @file
/// The math library's types as the course's tooling uses them: printed, plotted and saved.
/// The tooling depends on attn, never the other way round, so it borrows these names here.
#pragma once

#include "attn/core/batch.hpp"
#include "attn/core/matrix.hpp"

namespace course {

using attn::Batch;
using attn::BatchOf;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::require;
using attn::RowVector;
using attn::shape_str;

}  // namespace course
