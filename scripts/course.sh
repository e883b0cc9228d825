#!/usr/bin/env bash
# README command 1: set up, build what the course runs (the library, the chapters, the site),
# run every chapter in order, draw every figure, build the site, and say where to look.
#
#   scripts/course.sh              build/release: vectorised for this CPU (-march=native)
#   scripts/course.sh --portable   build/portable: no -march=native, for a build that fails or
#                                  a CPU the compiler does not know
#   scripts/course.sh --clang      build/clang: clang++ instead of g++
#
# Safe to run again: set-up installs only what is missing and the build is incremental. The
# test suites and benchmarks are not built here (scripts/test.sh builds them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
source scripts/lib.sh
parse_build_choice course.sh "$@"

step "Set-up: Debian packages"
scripts/setup.sh

step "Configure (${build_dir}: ${build_what})"
quietly "$build_dir/logs/configure.log" cmake --preset "$preset" -DATTN_WERROR="$werror"

# The chapters, in reading order: the numbered folders.
mapfile -t chapters < <(cd chapters && ls -d [0-9][0-9]_*/ | tr -d /)

step "Build the library and the ${#chapters[@]} chapters"
build_with_progress "$build_dir/logs/build.log" "$build_dir" "${chapters[@]}"

logs=$build_dir/figures
mkdir -p "$logs"
summary=()
for chapter in "${chapters[@]}"; do
  step "Chapter ${chapter}"
  # The walk-through goes to the terminal and to the log the `figures` target keeps, so
  # building the site below finds the figures up to date instead of running everything twice.
  t0=$(date +%s%N)
  if ! "$build_dir/bin/$chapter" --out "$root/plots" | tee "$logs/$chapter.txt.tmp"; then
    rm -f "$logs/$chapter.txt.tmp"
    printf '\n  FAILED: chapter %s (%s); its own error is the line above.\n%s\n' \
      "$chapter" "$build_dir/bin/$chapter --out plots" "$on_failure" >&2
    exit 1
  fi
  mv "$logs/$chapter.txt.tmp" "$logs/$chapter.txt"
  ms=$((($(date +%s%N) - t0) / 1000000))
  figures=$(ls plots/"${chapter:0:2}"_*.png 2>/dev/null | wc -l)
  plural=s; ((figures == 1)) && plural=""
  summary+=("$(printf '  %-24s %6d ms  %2d figure%-1s  %5d lines' "$chapter" "$ms" "$figures" \
                "$plural" "$(wc -l < "$logs/$chapter.txt")")")
done

step "The site (Doxygen)"
quietly "$build_dir/logs/docs.log" cmake --build "$build_dir" --target docs -j "$jobs"

step "Where to look"
printf '%s\n' "${summary[@]}"
echo
echo "  site:     $root/$build_dir/docs/html/index.html"
echo "  figures:  $root/plots/  ($(ls plots/*.png 2>/dev/null | wc -l) PNG, each with its .gp script and .dat data)"
echo "  explore:  $root/plots/*.html  ($(grep -l 'id="figure-data"' plots/*.html 2>/dev/null | wc -l) heat maps to open in a browser and read cell by cell)"
echo "  one chapter again:  $build_dir/bin/${chapters[0]} --help"
echo "  done in $(minutes $((SECONDS - started)))"
