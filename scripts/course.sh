#!/usr/bin/env bash
# README command 1: set up, build, run every chapter in order, draw every figure, build the site.
#
#   scripts/course.sh
#
# Safe to run again: set-up installs only what is missing and the build is incremental.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
source scripts/lib.sh

step "Set-up: Debian packages"
scripts/setup.sh

step "Configure and build (build/release)"
quietly build/release/logs/configure.log cmake --preset release
quietly build/release/logs/build.log cmake --build --preset release -j "$jobs"

# The chapters, in reading order: the numbered folders.
mapfile -t chapters < <(cd chapters && ls -d [0-9][0-9]_*/ | tr -d /)
logs=build/release/figures
mkdir -p "$logs"
summary=()
for chapter in "${chapters[@]}"; do
  step "Chapter ${chapter}"
  # The walk-through goes to the terminal and to the log the `figures` target keeps, so
  # building the site below finds the figures up to date instead of running everything twice.
  t0=$(date +%s%N)
  build/release/bin/"$chapter" --out "$root/plots" | tee "$logs/$chapter.txt.tmp"
  mv "$logs/$chapter.txt.tmp" "$logs/$chapter.txt"
  ms=$((($(date +%s%N) - t0) / 1000000))
  figures=$(ls plots/"${chapter:0:2}"_*.png 2>/dev/null | wc -l)
  plural=s; ((figures == 1)) && plural=""
  summary+=("$(printf '  %-24s %6d ms  %2d figure%-1s  %5d lines' "$chapter" "$ms" "$figures" \
                "$plural" "$(wc -l < "$logs/$chapter.txt")")")
done

step "The site (Doxygen)"
quietly build/release/logs/docs.log cmake --build --preset release --target docs -j "$jobs"

step "Where to look"
printf '%s\n' "${summary[@]}"
echo
echo "  site:     $root/build/release/docs/html/index.html"
echo "  figures:  $root/plots/  ($(ls plots/*.png 2>/dev/null | wc -l) PNG, each with its .gp script and .dat data)"
echo "  one chapter again:  build/release/bin/${chapters[0]} --help"
