#!/usr/bin/env bash
# Fuzzes the .npy reader (attn::parse_npy) with libFuzzer under ASan + UBSan for SECONDS.
#
#   scripts/fuzz.sh          30 s: the short run (scripts/test.sh runs `fuzz.sh 15` every time)
#   scripts/fuzz.sh 600      the longer run: after any change to common/course/npy.cpp, and before
#                            a release (repeat it; each run starts from what the last one found)
#
# Builds the `fuzz` preset (clang++, build/fuzz; logs in build/fuzz/logs), copies the seed
# corpus tests/fuzz/corpus_npy into build/fuzz/corpus (the committed seeds are never written to;
# the copy keeps what earlier runs found), and fuzzes tests/fuzz/fuzz_npy.cpp with the
# header-token dictionary. A finding is a crash, a sanitizer report, a leak, one input running
# longer than 10 s, an allocation over 64 MB, or an invariant of fuzz_npy.cpp broken: the input
# is kept in build/fuzz/findings/, the command that replays it is printed, and the script
# exits 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

seconds=${1:-30}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]   (default 30)" >&2
  exit 2
fi

out=build/fuzz
quietly $out/logs/configure.log cmake --preset fuzz -DATTN_WERROR="$werror"
quietly $out/logs/build.log cmake --build --preset fuzz -j "$jobs"

exe=$out/bin/fuzz_npy
log=$out/logs/fuzz.log
mkdir -p "$out/corpus" "$out/findings"
cp tests/fuzz/corpus_npy/*.npy "$out/corpus/"

# Inputs of up to 4 KB reach every branch of the reader (a NumPy header is ~120 bytes); the
# limits make a hang or an absurd allocation a finding instead of a stalled or swapping run.
status=0
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$exe" "$out/corpus" \
  -dict=tests/fuzz/npy.dict -max_len=4096 -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=64 -artifact_prefix="$out/findings/" \
  -print_final_stats=1 >"$log" 2>&1 || status=$?

final_stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corpus=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")

if ((status == 0)); then
  echo "fuzz_npy: ${seconds} s, $(final_stat number_of_executed_units) inputs" \
       "($(final_stat average_exec_per_sec) exec/s), cov ${cov:-?}, ft ${ft:-?}," \
       "corpus ${corpus:-?} inputs, peak RSS $(final_stat peak_rss_mb) MB: no findings"
  exit 0
fi

echo "fuzz_npy: FINDING (libFuzzer exit status $status); the log's end ($log):" >&2
tail -n 40 "$log" >&2
artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
if [[ -n $artifact ]]; then
  echo >&2
  echo "fuzz_npy: the input is $artifact; replay it with" >&2
  echo "  UBSAN_OPTIONS=print_stacktrace=1 $exe $artifact" >&2
fi
exit 1
