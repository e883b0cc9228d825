#!/usr/bin/env bash
# Copies the README's key figures from plots/ into docs/figures/, where GitHub can show them
# before anyone has run the course: the PNG, and its .dat (the numbers drawn). The test
# readme_figures_are_current fails when a chapter draws different numbers from the committed
# .dat; run this (after scripts/course.sh) then.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p docs/figures
for f in 04_saturation_vs_dk 05_masks 06_heads_sentence1 08_cross_attention; do
  cp "plots/$f.png" "plots/$f.dat" docs/figures/
  echo "docs/figures/$f.png and .dat"
done
