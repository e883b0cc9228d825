#!/usr/bin/env bash
# The AVX-512 part of the developers' warnings gate (scripts/test.sh runs it where warnings are
# errors): the library and the chapters compiled for AVX-512 with warnings as errors, on any
# x86-64 machine, and a planted fault that shows the gate would catch one.
#
#   scripts/avx512_gate.sh BUILD_DIR
#
# BUILD_DIR is the release build scripts/test.sh just made. When this CPU has AVX-512 and
# BUILD_DIR was compiled for it (-march=native), that build was the gate already; otherwise
# build/avx512 compiles the library and the chapters for -march=x86-64-v4 (they cannot run
# here, and need not: a warning is found by the compiler). Why: AVX-512 code is where GCC 12
# warned and no AVX2 machine saw it (GCC bug 105593 in Eigen's 16-lane exp); a learner with
# an AVX-512 CPU builds that code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh
release_dir=${1:?usage: scripts/avx512_gate.sh BUILD_DIR}

if [[ $(uname -m) != x86_64 ]]; then
  echo "  AVX-512 gate: skipped, this is not an x86-64 machine"
  exit 0
fi

cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$release_dir/CMakeCache.txt")
native=$(sed -n 's/^ATTN_NATIVE:BOOL=//p' "$release_dir/CMakeCache.txt")
if [[ $native == ON ]] && "$cxx" -march=native -dM -E -x c++ /dev/null | grep -q __AVX512F__
then
  gate_dir=$release_dir
  echo "  this CPU has AVX-512: $release_dir was compiled for it, warnings as errors"
else
  gate_dir=build/avx512
  quietly $gate_dir/logs/configure.log cmake --preset avx512 -DATTN_WERROR=ON
  quietly $gate_dir/logs/build.log cmake --build --preset avx512 -j "$jobs"
  echo "  the library and the chapters compile for AVX-512 (-march=x86-64-v4) without a warning"
fi

# The planted fault (tests/warnings_gate/): an uninitialised read compiled only for AVX-512
# must fail this build, on -Wuninitialized and nothing else.
log=$gate_dir/logs/planted_avx512_warning.log
if cmake --build "$gate_dir" --target planted_avx512_warning >"$log" 2>&1; then
  echo "  FAILED: the planted AVX-512-only uninitialised read compiled ($log):" \
       "the gate would let such a warning through" >&2
  exit 1
fi
if ! grep -qE 'Werror(=|,-W)uninitialized' "$log"; then  # g++ and clang++'s forms
  explain_failure "$log" "the planted AVX-512 fault failed, but not on -Wuninitialized" ""
  exit 1
fi
echo "  and an uninitialised read planted in AVX-512-only code fails it, as it must"
