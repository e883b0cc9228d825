#!/usr/bin/env bash
# Renders every diagram source docs/diagrams/NAME.dot into the docs/diagrams/NAME.svg committed
# beside it, the copy GitHub shows (the site renders its own from the .dot at build time), through
# docs/render_diagram.cmake as the build and the test do. Run it after editing a .dot and commit
# the .svg with it: the test diagrams_are_current (ctest -L docs) fails while the two disagree.
# Use the project's graphviz (Debian 12's, scripts/setup.sh): another version lays the same source
# out differently.
#
#   scripts/update_diagrams.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dot=$(command -v dot) || { echo "update_diagrams: dot not found: run scripts/setup.sh" >&2; exit 1; }
shopt -s nullglob
sources=(docs/diagrams/*.dot)
((${#sources[@]})) || { echo "update_diagrams: no docs/diagrams/*.dot" >&2; exit 1; }
for source in "${sources[@]}"; do
  cmake -DDOT="$dot" -DSOURCE="$source" -DOUT="${source%.dot}.svg" -P docs/render_diagram.cmake
  echo "${source%.dot}.svg"
done
