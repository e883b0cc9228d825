#!/usr/bin/env bash
# Rewrites scripts/compile_seconds.tsv: how long each source file takes to compile in the
# release build, which the build's progress line (scripts/lib.sh, build_with_progress) uses to
# say roughly how long a build has left. Run it after adding or much changing source files;
# a table that is a little out of date only makes that estimate a little rougher.
#
#   scripts/measure_compile_seconds.sh
#
# A clean release build in build/measure with every compile timed; about ten minutes on two
# cores. The times are CPU seconds, so other work on the machine hardly changes them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

dir=build/measure
rm -rf "$dir"
mkdir -p "$dir/logs"
build=$(realpath "$dir")
times=$build/logs/compile_seconds.raw
launcher=$build/timed_compile.sh
# The launcher runs the compiler and appends "<seconds> <folder> <object>": the compiler's CPU
# time (user + system, which other work on the machine hardly changes, unlike the time on the
# clock), the folder make ran it in and the argument after -o.
cat >"$launcher" <<'LAUNCHER'
#!/usr/bin/env bash
TIMEFORMAT='%U %S'
{ time "$@" 2>&3; } 3>&2 2>"$TIMES.$$"
code=$?
read -r user system <"$TIMES.$$"
rm -f "$TIMES.$$"
out=""
prev=""
for arg in "$@"; do [[ $prev == -o ]] && out=$arg; prev=$arg; done
printf '%s %s %s\n' "$(awk -v u="$user" -v s="$system" 'BEGIN { print u + s }')" "$PWD" \
  "$out" >>"$TIMES"
exit $code
LAUNCHER
chmod +x "$launcher"
quietly "$dir/logs/configure.log" cmake --preset release -B "$dir" -DATTN_WERROR=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"
TIMES=$times quietly "$dir/logs/build.log" cmake --build "$dir" -j "$jobs"

cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
{
  echo "# source	CPU seconds to compile it (release build, -march=native)"
  echo "# measured by scripts/measure_compile_seconds.sh on $(date -u +%F):" \
       "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
       "$("$cxx" --version | head -n1)"
  # "<s> <build>/common CMakeFiles/attn.dir/attn/ops/softmax.cpp.o" is common/attn/ops/softmax.cpp,
  # the name build_with_progress looks up (lib.sh's source_of).
  while read -r seconds folder object; do
    printf '%s\t%.0f\n' "$(source_of "${folder#"$build"/}/${object%.o}")" "$seconds"
  done <"$times" | sort
} >scripts/compile_seconds.tsv
echo "scripts/compile_seconds.tsv: $(grep -vc '^#' scripts/compile_seconds.tsv) sources"
