#!/usr/bin/env bash
# Efficient attention measured: speed as a share of one core's FMA peak (bench_efficient) and the
# memory one call takes (attention_memory), into a folder of raw output and two tables.
#
#   scripts/measure_efficiency.sh OUT [BUILD]      BUILD: a configured build tree (build/release)
#   MIN_TIME=0.2 scripts/measure_efficiency.sh OUT  shorter runs (default 0.3 s a benchmark)
#
# OUT/speed.tsv    name, n, GFLOP/s, % of peak, ms per call: every benchmark of bench_efficient,
#                  pinned to core 1 (taskset -c 1) except BM_TiledThreads, which runs unpinned;
#                  then as comment lines: BM_PeakFMA against the start-up peak (a check), the
#                  best tile sizes and the 2-thread speed-up
# OUT/memory.tsv   path, n, input+output MiB, peak RSS above that during the call (MiB), seconds:
#                  plain for n = 1024 .. 16384, tiled and tiled-causal for n = 1024 .. 65536
# OUT/*.json       Google Benchmark's own output; OUT/memory.txt attention_memory's lines
# Each table starts with a '#' line: machine (lscpu), date, git commit, load average (uptime's).
#
# About 3 minutes on the course's 2-vCPU machine: ~1.5 for the benchmarks, ~1.5 for memory (tiled
# at n = 65536 alone is ~30 s on one core). Other work on the machine lowers the numbers: check
# `uptime` first.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: scripts/measure_efficiency.sh OUT [BUILD]   (BUILD defaults to build/release)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$1
build=${2:-$root/build/release}
min_time=${MIN_TIME:-0.3}
bench=$build/benchmarks/bench_efficient
memory=$build/benchmarks/attention_memory
for program in "$bench" "$memory"; do
  if [[ ! -x $program ]]; then
    echo "measure_efficiency: no $program; build it first:" >&2
    echo "  cmake --build $build --target bench_efficient attention_memory" >&2
    exit 2
  fi
done
mkdir -p "$out"

machine=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
# Numbers measured on uncommitted code say so.
if ! git -C "$root" diff --quiet HEAD 2>/dev/null; then commit="$commit+changes"; fi
when=$(date -u '+%Y-%m-%d %H:%M UTC')
load() { cut -d ' ' -f 1-3 /proc/loadavg; }
header="# machine: $machine ($(nproc) CPUs); date: $when; commit: $commit; load at start: $(load)"

echo "== bench_efficient, one core (taskset -c 1), load $(load)"
# Pinned, bench_efficient leaves BM_TiledThreads out by itself; unpinned, only it runs.
taskset -c 1 "$bench" --benchmark_min_time="$min_time" \
  --benchmark_out="$out/bench_one_core.json" --benchmark_out_format=json
echo "== bench_efficient, threads (unpinned), load $(load)"
"$bench" --benchmark_min_time="$min_time" --benchmark_filter=BM_TiledThreads \
  --benchmark_out="$out/bench_threads.json" --benchmark_out_format=json

echo "== attention_memory, load $(load)"
: >"$out/memory.txt"
for n in 1024 2048 4096 8192 16384; do
  taskset -c 1 "$memory" plain "$n" | tee -a "$out/memory.txt"
done
for path in tiled tiled-causal; do
  for n in 1024 2048 4096 8192 16384 32768 65536; do
    taskset -c 1 "$memory" "$path" "$n" | tee -a "$out/memory.txt"
  done
done

{
  echo "$header; load after: $(load)"
  printf 'path\tn\tio_MiB\tpeak_above_MiB\tseconds\n'
  # "tiled n=65536 io_MiB=64.25 peak_above_MiB=0.62 seconds=14.81": the values, tab-separated
  awk -v OFS='\t' '{ for (i = 2; i <= NF; ++i) sub(/^[A-Za-z_]+=/, "", $i); print }' \
    "$out/memory.txt"
} >"$out/memory.tsv"

# Google Benchmark writes JSON; Debian's Python reads it with the standard library.
/usr/bin/python3 - "$out" "$header" <<'EOF'
import json, re, sys

out, header = sys.argv[1], sys.argv[2]
rows, context = [], {}
for name in ("bench_one_core.json", "bench_threads.json"):
    with open(f"{out}/{name}") as f:
        data = json.load(f)
    context = data["context"]
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        m = re.search(r"n:(\d+)", b["name"])
        # The tile sweep and the multi-head benchmark run at n = 1024 (bench_efficient.cpp).
        n = int(m.group(1)) if m else (None if b["name"] == "BM_PeakFMA" else 1024)
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        time = b["real_time"] if "threads:" in b["name"] else b["cpu_time"]
        rows.append((b["name"], n, b["FLOP/s"] / 1e9, 100 * b["peak_ratio"], time * scale))

with open(f"{out}/speed.tsv", "w") as f:
    f.write(f"{header}; fma peak {context.get('fma_peak_GFLOP/s', '?')} GFLOP/s "
            f"({context.get('fma_kernel', '?')})\n")
    f.write("name\tn\tGFLOP/s\tpct_peak\tms\n")
    for name, n, gflops, pct, ms in rows:
        f.write(f"{name}\t{'' if n is None else n}\t{gflops:.1f}\t{pct:.1f}\t{ms:.3f}\n")
    # The peak is measured once at start-up; BM_PeakFMA runs the same kernel again later. On a
    # shared host (a cloud VM) the core is sometimes slower for seconds at a time, and then the
    # two disagree and every % of peak in this table is off by as much.
    check = [r for r in rows if r[0] == "BM_PeakFMA"]
    if check:
        verdict = "ok" if 90 <= check[0][3] <= 105 else "the core's speed moved: run it again"
        f.write(f"# check: BM_PeakFMA at {check[0][3]:.1f}% of the start-up peak ({verdict})\n")
    sweep = [r for r in rows if r[0].startswith("BM_TileSweep")]
    if sweep:
        best = max(sweep, key=lambda r: r[2])
        f.write(f"# best tile: {best[0]} {best[2]:.1f} GFLOP/s, {best[3]:.1f}% of peak\n")
    threads = {int(re.search(r"threads:(\d+)", r[0]).group(1)): r[2]
               for r in rows if r[0].startswith("BM_TiledThreads")}
    if 1 in threads and 2 in threads:
        f.write(f"# 2 threads vs 1 at n = 4096: {threads[2] / threads[1]:.2f}x\n")
EOF

# The tables on the terminal: the '#' lines as they are, the rest aligned.
for table in speed memory; do
  echo "== $out/$table.tsv"
  grep '^#' "$out/$table.tsv"
  grep -v '^#' "$out/$table.tsv" | column -t -s $'\t'
done
