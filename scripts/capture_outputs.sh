#!/usr/bin/env bash
# What the chapters write, captured for comparison: every chapter's stdout, figure data
# and scripts (.dat, .gp) and dumps (.npy, manifest), at its default options and at one other
# set that moves its knobs. A change that should not alter what a learner sees (moving code,
# renaming, splitting a file, formatting) must leave two captures identical:
#
#   bash scripts/capture_outputs.sh build/release /tmp/before     # before the change
#   ... change, rebuild ...
#   bash scripts/capture_outputs.sh build/release /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Compare captures made by one binary's build settings on one machine: another CPU or compiler
# prints other last digits (README, "Your machine"). The PNGs are left out: gnuplot draws them
# from the .dat and .gp files captured here. Takes about 4 minutes on two cores (09 trains twice).
set -euo pipefail
if (($# != 2)); then
  echo "usage: scripts/capture_outputs.sh BUILD_DIR OUT_DIR" >&2
  exit 2
fi
bin=$(realpath "$1")/bin out=$(realpath -m "$2")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh  # chapter_list
[[ -x $bin/01_rnn ]] || { echo "capture_outputs: no chapters in $bin: build them first" >&2; exit 2; }

# The second option set of each chapter: every knob it has that changes the numbers.
declare -A other=(
  [01_rnn]="--seed 7 --input-size 5 --hidden 6 --steps 7 --distance 30 --seeds 3"
  [02_attention_by_hand]="--seed 7 --scale --random-weights"
  [03_vectorized_qkv]="--seed 7 --n 9 --d-model 64 --scale"
  [04_softmax_scaling]="--seed 7 --samples 3000 --std 10 --d-k 16 --no-scale"
  [05_masking]="--seed 7 --mask window --window 2 --fill -1e9 --ids 4,3,2,1/5,6,0,0 --d-model 16 --d-k 8"
  [06_multi_head]="--seed 7 --heads 2 --d-model 12 --seq-len 7 --mask causal"
  [07_positional_encoding]="--seed 7 --d-model 16 --positions 30 --max-offset 40"
  [08_transformer_block]="--seed 7 --layers 1 --heads 2 --d-model 8 --d-ff 16 --norm pre"
  [09_training]="--seed 7 --steps 60 --layers 1 --heads 2 --d-model 16 --length 6 --context 12 --norm post --label-smoothing 0.1"
  [10_efficient_attention]="--seed 7 --row 2,7,1,8 --split 2 --n 7 --d 3 --query-tile 2 --key-tile 5 --mask pad --padding 2"
  [11_decoding]="--seed 7 --d-model 24 --heads 6 --kv-heads 3 --layers 3 --window 5 --prompt 7 --new 10 --layout halves"
  [12_language_model]="--quick --seed 7 --merges 16"
)

rm -rf "$out"
mkdir -p "$out"
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
mapfile -t chapters < <(chapter_list)
for chapter in "${chapters[@]}"; do
  [[ -n ${other[$chapter]:-} ]] || { echo "capture_outputs: no second option set for $chapter" >&2; exit 1; }
  for set in default other; do
    dir=$out/$chapter/$set
    mkdir -p "$dir"
    args=()
    [[ $set == other ]] && read -ra args <<<"${other[$chapter]}"
    echo "capture_outputs: $chapter ${args[*]:-(defaults)}"
    # Relative folders, so that the paths the chapter prints are the same in every capture.
    # stderr is left out: it carries the progress lines and timings, which differ every run.
    (cd "$dir" && "$bin/$chapter" "${args[@]}" --out plots --dump dump >stdout.txt 2>"$errors") ||
      { echo "capture_outputs: $chapter $set failed:" >&2; cat "$errors" >&2; exit 1; }
    find "$dir/plots" -name '*.png' -delete
  done
done
echo "capture_outputs: $(find "$out" -type f | wc -l) files in $out"
