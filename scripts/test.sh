#!/usr/bin/env bash
# README command 2: set up, then every test: unit tests and chapter smoke tests (release), the
# whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, 15 s of fuzzing the
# .npy reader (scripts/fuzz.sh) beside the site's build with Doxygen warnings as errors, and every page of it
# loaded in headless Chromium (scripts/check_site.py). .ci/run calls exactly this.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

step "Set-up: Debian packages"
scripts/setup.sh

step "Release: configure, build, test (the sanitize build starts beside the tests)"
quietly build/release/logs/configure.log cmake --preset release
quietly build/release/logs/build.log cmake --build --preset release -j "$jobs"
# The release tests leave part of the two cores idle (a test waiting on a chapter it runs), so
# the sanitize build starts beside them and takes up the slack; nothing here is timed.
# It runs in a process group of its own (setsid), so that failed release tests stop it whole.
mkdir -p build/sanitize/logs
setsid bash -c 'source scripts/lib.sh &&
  quietly build/sanitize/logs/configure.log cmake --preset sanitize &&
  quietly build/sanitize/logs/build.log cmake --build --preset sanitize -j "$jobs"' \
  >build/sanitize/logs/steps.log 2>&1 &
sanitize_pid=$!
trap 'kill -- -"$sanitize_pid" 2>/dev/null || true' EXIT
ctest --preset release -j "$jobs"

step "Sanitize (ASan + UBSan): configure, build, test"
if ! wait "$sanitize_pid"; then
  cat build/sanitize/logs/steps.log
  exit 1
fi
trap - EXIT
cat build/sanitize/logs/steps.log
ctest --preset sanitize -j "$jobs"

step "Fuzz the .npy reader (libFuzzer, 15 s) and build the site (Doxygen, warnings are errors)"
# Side by side: the fuzzer runs on one core and Doxygen on one, so together they take the two
# cores the test command has instead of taking turns (the test command must stay under 20
# minutes on two cores).
mkdir -p build/fuzz/logs
setsid scripts/fuzz.sh 15 >build/fuzz/logs/test-run.log 2>&1 &
fuzz_pid=$!
trap 'kill -- -"$fuzz_pid" 2>/dev/null || true' EXIT  # a failed site build stops the fuzzer too
quietly build/release/logs/docs.log cmake --build --preset release --target docs -j "$jobs"
if wait "$fuzz_pid"; then
  sed 's/^/  fuzz: /' build/fuzz/logs/test-run.log
else
  code=$?
  cat build/fuzz/logs/test-run.log
  printf '\n  FAILED (exit %d): scripts/fuzz.sh 15\n' "$code" >&2
  exit "$code"
fi
trap - EXIT

step "Site: every page in headless Chromium at 1280 px"
# First the check itself: each page of tests/site_defects plants one defect it must report.
quietly build/release/logs/check_site_self_test.log /usr/bin/python3 scripts/check_site.py \
  --self-test tests/site_defects --mathjax build/release/docs/html/mathjax
/usr/bin/python3 scripts/check_site.py build/release/docs/html

step "All tests passed"
