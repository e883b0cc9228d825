#!/usr/bin/env bash
# README command 2: set up, then every test: unit tests and chapter smoke tests (release), the
# whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, 30 s of fuzzing the
# .npy reader (scripts/fuzz.sh), and the site with Doxygen warnings as errors. .ci/run calls
# exactly this.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

step "Set-up: Debian packages"
scripts/setup.sh

step "Release: configure, build, test"
quietly build/release/logs/configure.log cmake --preset release
quietly build/release/logs/build.log cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

step "Sanitize (ASan + UBSan): configure, build, test"
quietly build/sanitize/logs/configure.log cmake --preset sanitize
quietly build/sanitize/logs/build.log cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"

step "Fuzz the .npy reader (libFuzzer, 30 s)"
scripts/fuzz.sh 30

step "Site: Doxygen, warnings are errors"
quietly build/release/logs/docs.log cmake --build --preset release --target docs

step "All tests passed"
