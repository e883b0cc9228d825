#!/usr/bin/env bash
# README command 2: set up, then every test: unit tests and chapter smoke tests (release), the
# whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, and the site with
# Doxygen warnings as errors. .ci/run calls exactly this.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=$(nproc)
started=$SECONDS

step() { printf '\n\033[1m## %s\033[0m (%ds)\n' "$*" $((SECONDS - started)); }

step "Set-up: Debian packages"
scripts/setup.sh

step "Release: configure, build, test"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

step "Sanitize (ASan + UBSan): configure, build, test"
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"

step "Site: Doxygen, warnings are errors"
cmake --build --preset release --target docs

step "All tests passed"
