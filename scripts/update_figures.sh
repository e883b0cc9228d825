#!/usr/bin/env bash
# Copies every figure a page shows into docs/figures/, where GitHub finds it before anyone has
# run the course: the PNG, and its .dat (the numbers drawn). The pages are README.md and
# chapters/*/README.md, and a figure is a line ![caption](../../docs/figures/NAME.png), so the
# list is read from them; a figure of docs/figures that no page shows any more is removed.
# The figures come from plots/, so first let the chapters draw them there (scripts/course.sh,
# or `cmake --build --preset release --target figures`). The test figures_are_current fails
# when a chapter draws other numbers than the committed .dat, or when docs/figures and the
# pages disagree; run this then.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A figure line names plots/NAME.png where a page has not been moved to docs/figures yet
# (md_filter.pl refuses that link and says so); its figure is copied all the same.
mapfile -t names < <(sed -n -E \
  's#^[[:space:]]*!\[[^]]*\]\(([^)]*/)?(docs/figures|plots)/([A-Za-z0-9_.-]+)\.png\)[[:space:]]*$#\3#p' \
  README.md chapters/*/README.md | sort -u)
if (( ${#names[@]} == 0 )); then
  echo "update_figures.sh: no page shows a figure; nothing to copy" >&2
  exit 1
fi
missing=0
for name in "${names[@]}"; do
  for ext in png dat; do
    if [[ ! -f plots/$name.$ext ]]; then
      echo "update_figures.sh: plots/$name.$ext is missing: run the chapters first (scripts/course.sh)" >&2
      missing=1
    fi
  done
done
(( missing == 0 )) || exit 1
mkdir -p docs/figures
for name in "${names[@]}"; do
  cp "plots/$name.png" "plots/$name.dat" docs/figures/
done
echo "docs/figures: ${#names[@]} figures (.png and .dat) copied from plots/"
shopt -s nullglob
for file in docs/figures/*; do
  base=${file##*/}
  name=${base%.*}
  if [[ ! ( $base == "$name.png" || $base == "$name.dat" ) ]] || ! printf '%s\n' "${names[@]}" | grep -qxF "$name"; then
    rm -- "$file"
    echo "removed $file: no page shows it"
  fi
done
