#!/usr/bin/env bash
# README command 1: set up, build, run every chapter in order, draw every figure, build the site.
#
#   scripts/course.sh
#
# Safe to run again: set-up installs only what is missing and the build is incremental.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
jobs=$(nproc)

step() { printf '\n\033[1m## %s\033[0m\n' "$*"; }

step "Set-up: Debian packages"
scripts/setup.sh

step "Configure and build (build/release)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"

# The chapters, in reading order: the numbered folders.
mapfile -t chapters < <(cd chapters && ls -d [0-9][0-9]_*/ | tr -d /)
logs=build/release/figures
mkdir -p "$logs"
for chapter in "${chapters[@]}"; do
  step "Chapter ${chapter}"
  # The walk-through goes to the terminal and to the log the `figures` target keeps, so
  # building the site below finds the figures up to date instead of running everything twice.
  build/release/bin/"$chapter" --out "$root/plots" | tee "$logs/$chapter.txt.tmp"
  mv "$logs/$chapter.txt.tmp" "$logs/$chapter.txt"
done

step "The site (Doxygen)"
cmake --build --preset release --target docs

step "Where to look"
echo "  site:     $root/build/release/docs/html/index.html"
echo "  figures:  $root/plots/  ($(ls plots/*.png 2>/dev/null | wc -l) PNG, each with its .gp script and .dat data)"
echo "  one chapter again:  build/release/bin/${chapters[0]} --help"
