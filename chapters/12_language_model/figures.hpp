// Chapter 12's figures.
#pragma once

#include "course/plot.hpp"
#include "course/training_loop.hpp"

namespace lm {

/// 12_loss: the training loss of every step and the validation loss of every evaluation, in
/// nats per character, with the two levels the page compares them with: ln V (a model that
/// knows nothing) and the unigram entropy (one that knows only how often each character is).
void draw_loss(course::Plotter& plot, const training::History& h, double uniform, double unigram);

}  // namespace lm
