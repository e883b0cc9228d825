#!/usr/bin/env bash
# README command 2: set up, then every test: unit tests and chapter smoke tests (release), the
# whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, 15 s of fuzzing the
# .npy reader (scripts/fuzz.sh) beside the site's build, and every page of the site loaded in
# headless Chromium (scripts/check_site.py). .ci/run calls exactly this.
#
#   scripts/test.sh              the release tests in build/release (-march=native, g++)
#   scripts/test.sh --portable   in build/portable (no -march=native)
#   scripts/test.sh --clang      in build/clang (clang++)
#
# Where warnings are errors (CI=true, or ATTN_WERROR=ON: the developers' gate, scripts/lib.sh)
# it also proves that no warning hides in code compiled for AVX-512, which a learner's CPU may
# have and this one may not (the AVX-512 gate below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
parse_build_choice test.sh "$@"

step "Set-up: Debian packages"
scripts/setup.sh

step "Release: configure, build, test (the sanitize build starts beside the tests)"
quietly "$build_dir/logs/configure.log" cmake --preset "$preset" -DATTN_WERROR="$werror"
build_with_progress "$build_dir/logs/build.log" "$build_dir" all
if [[ $werror == ON ]]; then
  step "The AVX-512 gate: no warning in code compiled for AVX-512 (warnings are errors here)"
  bash scripts/avx512_gate.sh "$build_dir"
fi
# The release tests leave part of the two cores idle (a test waiting on a chapter it runs), so
# the sanitize build starts beside them and takes up the slack; nothing here is timed.
# It runs in a process group of its own (setsid), so that failed release tests stop it whole.
mkdir -p build/sanitize/logs
setsid bash -c 'source scripts/lib.sh &&
  quietly build/sanitize/logs/configure.log cmake --preset sanitize -DATTN_WERROR='"$werror"' &&
  quietly build/sanitize/logs/build.log cmake --build --preset sanitize -j "$jobs"' \
  >build/sanitize/logs/steps.log 2>&1 &
sanitize_pid=$!
trap 'kill -- -"$sanitize_pid" 2>/dev/null || true' EXIT
ctest --preset "$preset" -j "$jobs"

step "Sanitize (ASan + UBSan): configure, build, test"
if ! wait "$sanitize_pid"; then
  cat build/sanitize/logs/steps.log
  exit 1
fi
trap - EXIT
cat build/sanitize/logs/steps.log
ctest --preset sanitize -j "$jobs"

step "Fuzz the .npy reader (libFuzzer, 15 s) and build the site (Doxygen)"
# Side by side: the fuzzer runs on one core and Doxygen on one, so together they take the two
# cores the test command has instead of taking turns (the test command must stay under 20
# minutes on two cores).
mkdir -p build/fuzz/logs
setsid scripts/fuzz.sh 15 >build/fuzz/logs/test-run.log 2>&1 &
fuzz_pid=$!
trap 'kill -- -"$fuzz_pid" 2>/dev/null || true' EXIT  # a failed site build stops the fuzzer too
quietly "$build_dir/logs/docs.log" cmake --build "$build_dir" --target docs -j "$jobs"
if wait "$fuzz_pid"; then
  sed 's/^/  fuzz: /' build/fuzz/logs/test-run.log
else
  code=$?
  cat build/fuzz/logs/test-run.log
  printf '\n  FAILED (exit %d): scripts/fuzz.sh 15\n' "$code" >&2
  exit "$code"
fi
trap - EXIT

step "Site: every page in headless Chromium at 1280 px, the chapters at 390 px too"
# First the check itself: each page of tests/repository/site_defects plants one defect it must report.
quietly "$build_dir/logs/check_site_self_test.log" /usr/bin/python3 scripts/check_site.py \
  --self-test tests/repository/site_defects --mathjax "$build_dir/docs/html/mathjax"
/usr/bin/python3 scripts/check_site.py "$build_dir/docs/html"

step "All tests passed"
