#!/usr/bin/env bash
# The platform matrix: builds and tests the course as learners' machines would, one row each,
# and prints one line per row with its verdict and time. Exits 1 if any row failed.
#
#   scripts/check_platforms.sh                  every row, in the order below
#   scripts/check_platforms.sh clang aarch64    only these rows
#
# Rows (each in build/platforms/<row>/, its logs in build/platforms/<row>/logs/):
#   avx512    x86-64 compiled for AVX-512 (-march=x86-64-v4) by g++, warnings as errors: the
#             library, chapters, tests and benchmarks. The release tests run too where this
#             CPU has AVX-512; elsewhere the row can only compile, and says so.
#   baseline  x86-64 without AVX (ATTN_NATIVE=OFF, -march=x86-64: SSE2 only) by g++: build and
#             the release tests.
#   clang     clang++ (Debian's) as the compiler of the release build (-march=native): build
#             and the release tests.
#   trixie    Debian 13 (GCC 14 and its Eigen, CLI11, {fmt}, nlohmann-json, gnuplot, Doxygen)
#             in a chroot made by debootstrap from Debian's archive: the README's first command,
#             scripts/course.sh, end to end in a fresh clone (scripts/platforms/trixie.sh).
#   aarch64   Debian's cross compiler g++-aarch64-linux-gnu with the arm64 -dev packages, run
#             under qemu-user-static: build, every chapter with --no-plots (12 also --quick),
#             and the release tests that finish under emulation (scripts/platforms/aarch64.sh
#             says which).
#
# Run it before landing a change to the build, to SIMD code or to the scripts; it takes about
# an hour on two cores, most of it compiling. It installs what each row needs (Debian
# packages, the chroot), as root or with sudo. Every build runs under `nice`, so the machine
# stays usable.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh  # jobs, first_error
all_rows=(avx512 baseline clang trixie aarch64)

usage() {
  echo "usage: scripts/check_platforms.sh [ROW...]   rows: ${all_rows[*]} (default: all)" >&2
  exit 2
}
rows=("$@")
((${#rows[@]})) || rows=("${all_rows[@]}")
for row in "${rows[@]}"; do
  [[ " ${all_rows[*]} " == *" $row "* ]] || usage
done

# Release tests: what `ctest --preset release` runs (every label but the exercise stubs).
release_tests=(-LE '^exercises$' -j "$jobs" --output-on-failure --no-tests=error)

# x86 ROW CONFIGURE_ARGS...: configure, build everything and (unless told not to run) test.
# Prints the row's detail; returns non-zero on the first failure.
x86_row() {
  local row=$1 run_tests=$2
  shift 2
  local dir=build/platforms/$row logs=build/platforms/$row/logs
  mkdir -p "$logs"
  nice cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_DOCS=OFF "$@" \
    >"$logs/configure.log" 2>&1 || { detail="configure failed: $logs/configure.log"; return 1; }
  nice cmake --build "$dir" -j "$jobs" >"$logs/build.log" 2>&1 ||
    { detail="build failed: $(first_error "$logs/build.log") ($logs/build.log)"; return 1; }
  if [[ $run_tests != yes ]]; then
    detail="built warning-free; $run_tests"
    return 0
  fi
  nice ctest --test-dir "$dir" "${release_tests[@]}" >"$logs/test.log" 2>&1
  local code=$? summary
  summary=$(grep -E '^[0-9]+% tests passed' "$logs/test.log" | tail -1)
  detail="built warning-free; ${summary:-no test summary} ($logs/test.log)"
  return $code
}

row_avx512() {
  if grep -qw avx512f /proc/cpuinfo; then
    x86_row avx512 yes -DATTN_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v4 -DATTN_WERROR=ON
  else
    x86_row avx512 "not run: this CPU has no AVX-512 (the compile is the check)" \
      -DATTN_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v4 -DATTN_WERROR=ON
  fi
}
row_baseline() {
  x86_row baseline yes -DATTN_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64 -DATTN_WERROR=ON
}
row_clang() {
  x86_row clang yes -DCMAKE_CXX_COMPILER=clang++ -DATTN_WERROR=ON
}
row_trixie() { nice bash scripts/platforms/trixie.sh; }
row_aarch64() { nice bash scripts/platforms/aarch64.sh; }

if ! bash scripts/setup.sh >/dev/null; then
  echo "check_platforms: scripts/setup.sh failed" >&2
  exit 1
fi

failed=0
lines=()
for row in "${rows[@]}"; do
  detail=""
  t0=$SECONDS
  mkdir -p "build/platforms/$row/logs"
  if [[ $row == trixie || $row == aarch64 ]]; then
    # Their scripts print their detail as the last line of their output.
    out=$("row_$row" 2>&1 | tee "build/platforms/$row/logs/steps.log")
    code=${PIPESTATUS[0]}
    detail=$(printf '%s\n' "$out" | tail -n1)
  else
    "row_$row"
    code=$?
  fi
  elapsed=$((SECONDS - t0))
  verdict=PASS
  ((code == 0)) || { verdict=FAIL; failed=1; }
  line=$(printf '%-9s %s  %3dm%02ds  %s' "$row" "$verdict" $((elapsed / 60)) $((elapsed % 60)) \
           "$detail")
  lines+=("$line")
  echo "$line"
done

echo
echo "check_platforms: $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'no AVX-512'), $(date -u +%F)"
printf '%s\n' "${lines[@]}"
exit $failed
