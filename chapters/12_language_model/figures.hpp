// Chapter 12's figures.
#pragma once

#include "course/plot.hpp"
#include "course/training_loop.hpp"
#include "heads.hpp"

#include <string>
#include <vector>

namespace lm {

/// 12_loss: the training loss of every step and the validation loss of every evaluation, in
/// nats per character, with the two levels the page compares them with: ln V (a model that
/// knows nothing) and the unigram entropy (one that knows only how often each character is).
void draw_loss(course::Plotter& plot, const training::History& h, double uniform, double unigram);

/// 12_heads_training: the induction score of the two heads that end with the highest, and the
/// previous-token score of the head that ends with the highest, at every step scored, with
/// the validation loss on the right-hand axis: Olsson et al.'s phase change, in this run.
void draw_heads_training(course::Plotter& plot, const HeadHistory& heads,
                         const training::History& h, const HeadScore& even);

/// 12_head_scores: the five scores of every layer x head at the end, one [L x H] map each.
void draw_head_scores(course::Plotter& plot, const std::vector<HeadScore>& scores, Index layers,
                      Index heads);

/// 12_head_<name>: one head's weights [m x m] on a sentence, its characters along both axes
/// (a space as '_'), the keys the head may not see hatched; the twin shows each weight's score.
void draw_head_map(course::Plotter& plot, const std::string& name, const std::string& title,
                   const HeadMap& map, const std::string& sentence);

}  // namespace lm
