#!/usr/bin/env bash
# Chapter 12's training step against PyTorch's on the same model, batch and optimiser, on one
# core and on two, in interleaved rounds (course 1 thread, PyTorch 1 thread, course 2 threads,
# PyTorch 2 threads, then again): a machine whose clock drifts during the measurement moves both
# sides of each ratio alike. Prints a table of ms per step and tokens per second, each the median
# of the rounds, and the ratios.
#
#   scripts/measure_training_speed.sh [ROUNDS [BUILD]]    ROUNDS 3, BUILD build/release
#
# Needs bench_training (cmake --build BUILD --target bench_training), Debian's python3-torch, and
# OpenBLAS for PyTorch's products (benchmarks/pytorch_language_model.py says why): Debian's
# libopenblas0-openmp, installed or unpacked, found through OPENBLAS_DIR (default: its installed
# folder, /usr/lib/<arch>/openblas-openmp). One core is core 1 (taskset -c 1), two are 0 and 1.
# About 2 minutes with 3 rounds. Other work on the machine lowers every number: check `uptime`.
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${2:-$root/build/release}
bench=$build/benchmarks/bench_training
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
openblas=${OPENBLAS_DIR:-/usr/lib/$arch/openblas-openmp}
if [[ ! $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/measure_training_speed.sh [ROUNDS [BUILD]]   (ROUNDS >= 1, default 3)" >&2
  exit 2
fi
if [[ ! -x $bench ]]; then
  echo "measure_training_speed: no $bench; build it: cmake --build $build --target bench_training" >&2
  exit 2
fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "measure_training_speed: Debian's python3-torch is missing: sudo apt-get install python3-torch" >&2
  exit 2
fi
if [[ ! -e $openblas/libblas.so.3 ]]; then
  echo "measure_training_speed: no OpenBLAS in $openblas. Install libopenblas0-openmp, or unpack it:" >&2
  echo "  cd /tmp && apt-get download libopenblas0-openmp && dpkg -x libopenblas0-openmp_*.deb openblas" >&2
  echo "  OPENBLAS_DIR=/tmp/openblas/usr/lib/$arch/openblas-openmp scripts/measure_training_speed.sh" >&2
  exit 2
fi

# ms per step of one course run: Google Benchmark's real time, in ns, over 2 s of steps.
course_ms() {
  local cores=$1 threads=$2
  taskset -c "$cores" "$bench" --benchmark_filter="LanguageModelStep/$threads/" \
    --benchmark_min_time=2 --benchmark_format=csv 2>/dev/null |
    awk -F, '/LanguageModelStep/ { printf "%.2f\n", $3 / 1e6 }'
}
# ms per step of one PyTorch run: 40 steps after 3, one round (this script makes the rounds).
torch_ms() {
  local cores=$1 threads=$2
  LD_LIBRARY_PATH=$openblas taskset -c "$cores" /usr/bin/python3 \
    "$root/benchmarks/pytorch_language_model.py" --threads "$threads" --steps 40 --rounds 1 |
    awk '/^threads/ { print $3 }'
}

declare -a c1 t1 c2 t2
for ((r = 0; r < rounds; r++)); do
  c1+=("$(course_ms 1 1)")
  t1+=("$(torch_ms 1 1)")
  c2+=("$(course_ms 0,1 2)")
  t2+=("$(torch_ms 0,1 2)")
  echo "round $((r + 1)): course ${c1[r]} / ${c2[r]} ms, PyTorch ${t1[r]} / ${t2[r]} ms (1 / 2 threads)" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_c1=$(median "${c1[@]}")
m_t1=$(median "${t1[@]}")
m_c2=$(median "${c2[@]}")
m_t2=$(median "${t2[@]}")
tokens=768  # chapter 12's batch: 12 windows of 64
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%F); $(git -C "$root" rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians of $rounds interleaved rounds; tokens = 12 windows x 64 positions per step"
awk -v c1="$m_c1" -v t1="$m_t1" -v c2="$m_c2" -v t2="$m_t2" -v n="$tokens" 'BEGIN {
  printf "%-28s %10s %12s %10s %12s\n", "", "1 thread", "tokens/s", "2 threads", "tokens/s"
  printf "%-28s %7.1f ms %12.0f %7.1f ms %12.0f\n", "this course", c1, n * 1000 / c1, c2, n * 1000 / c2
  printf "%-28s %7.1f ms %12.0f %7.1f ms %12.0f\n", "PyTorch 1.13 + OpenBLAS", t1, n * 1000 / t1, t2, n * 1000 / t2
  printf "course / PyTorch: %.2fx on 1 thread, %.2fx on 2; course 2 threads / 1: %.2fx\n", t1 / c1, t2 / c2, c1 / c2
}'
