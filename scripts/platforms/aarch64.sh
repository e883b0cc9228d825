#!/usr/bin/env bash
# Platform row "aarch64": the course cross-compiled for 64-bit Arm by Debian's
# g++-aarch64-linux-gnu (scripts/platforms/aarch64-toolchain.cmake) and run under qemu-user:
# the whole build warning-free, every chapter with --no-plots (chapter 12 also --quick), then
# the release tests that finish under emulation. Arm's NEON rounds some sums differently from x86's AVX2, so this is
# where a tolerance that only x86 meets shows up.
#
#   bash scripts/platforms/aarch64.sh
#
# Works in build/platforms/aarch64 (logs in its logs/). Prints its detail for the matrix as its
# last line; exits non-zero when a step fails, naming the step and its log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/lib.sh  # jobs, first_error, chapter_list
dir=build/platforms/aarch64
logs=$dir/logs
mkdir -p "$logs/chapters"

fail() {
  echo "$*"
  exit 1
}
say() { echo "aarch64: $*"; }

# Release tests left out, as regexes on test names. Times are from a run under qemu with a
# 60-s limit per test, two at a time, niced on two shared cores; natively each takes seconds.
slow_tests=(
  # Chapter 09 trains two models: 942 s under qemu (step 3 below runs it, so it is covered).
  'smoke\.09_training' 'deterministic\.09_training'
  # Compares the figures of every smoke run with docs/figures, so it needs chapter 09's too.
  'figures_are_current'
  # Over 60 s each (02 took 21 s and 05 43 s, and stay): many runs of a chapter per test. The
  # chapters' defaults run in step 3 and in smoke.*, their knobs' edges in Chapter0N.* tests.
  'EveryChapter/KnobSweepOf\.RunsCleanlyOnEveryAcceptedCombination/(01|03|04|06|07|08|09|10)_.*'
  # Over 60 s each: training runs and chapter 09's walk-through; the backward passes they use
  # are checked by the layers' suites and test_gradient_check, which stay.
  'Chapter09Trains\..*' 'Chapter09\.BackwardByHandPrintsTheHandArithmetic'
  # Over 60 s: gradient checks at many step sizes; KnownFunction.* and CheckAllLayers.* stay.
  'StepSize\.TruncationFallsAsHSquaredAndRoundingGrowsAsOneOverH'
)
# Left out because qemu-user, not arm64, behaves differently. Under qemu, posix_spawnp of a
# program that does not exist returns 0 and the child exits 127, where Linux returns ENOENT (a
# 10-line C program shows it), so "no gnuplot" reads as "gnuplot failed" in these PlotTests.
# And a SIGHUP ignored before qemu starts is not ignored in what the chapter spawns.
qemu_limits=(
  'PlotTest\.(HeatmapWritesDataAndScriptWithRelativeNames|HeatmapNumbersFromZeroWhenAsked)'
  'PlotTest\.(HeatmapHatchesBlockedCellsAndKeysThem|TicLabelsThinOutWhenCellsAreTooSmallForOneEach)'
  'PlotTest\.(GridShrinksToFitThePageAndTurnsWideLabels|GridWritesOneBlockPerPanelAndRenders)'
  'PlotTest\.(HistogramBinsMatchAHandCount|CurveForLogYDropsOnlyThePointsALogAxisCannotShow)'
  'PlotTest\.(MissingGnuplotWritesDataAndScriptAndSaysHowToRender|NumbersIgnoreTheLocale)'
  'PlotTest\.(RerenderingGivesIdenticalDataAndScript|GridWithoutColourBarDrawsNoneAndIsNarrower)'
  'Signals\.GnuplotKeepsASignalTheUserIgnored'
)

# 1. The cross compiler, the emulator and the arm64 libraries (multiarch), installed if missing.
# gnuplot and NumPy are the host's: a test that draws a figure or reads a .npy back runs them.
packages=(cmake make g++-aarch64-linux-gnu qemu-user-static binfmt-support
  libeigen3-dev libcli11-dev nlohmann-json3-dev gnuplot-nox python3-numpy
  libc6:arm64 libstdc++6:arm64 libgomp1:arm64 libfmt-dev:arm64 libgtest-dev:arm64
  libbenchmark-dev:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing from Debian's archive: ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  { apt-get -o DPkg::Lock::Timeout=600 -q update &&
    DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=600 -y -q \
      --no-install-recommends "${missing[@]}"; } >"$logs/apt.log" 2>&1 ||
    fail "apt-get install failed: $logs/apt.log"
fi

# Tests that run a chapter from inside another program (a CMake script, a test program that
# spawns it) exec the arm64 binary directly; only the kernel's binfmt_misc hands that to qemu.
# Registered as qemu-user-static's package does on a machine with systemd, and left registered.
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  mountpoint -q /proc/sys/fs/binfmt_misc ||
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
    fail "cannot mount binfmt_misc, which running arm64 programs from the tests needs"
  update-binfmts --enable qemu-aarch64 >"$logs/binfmt.log" 2>&1 ||
    fail "cannot register qemu-aarch64 with binfmt_misc: $logs/binfmt.log"
fi

# 2. Configure and build everything: library, chapters, tests, benchmarks. -march=native would
# describe the build machine, not the target; no site (this row checks code, not pages).
gcc=$(aarch64-linux-gnu-g++ -dumpfullversion)
say "configure and build with aarch64-linux-gnu-g++ $gcc (log: $logs/build.log)"
t0=$SECONDS
cmake -S . -B "$dir" --toolchain scripts/platforms/aarch64-toolchain.cmake \
  -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF -DATTN_BUILD_DOCS=OFF -DATTN_WERROR=ON \
  >"$logs/configure.log" 2>&1 || fail "configure failed: $logs/configure.log"
cmake --build "$dir" -j "$jobs" >"$logs/build.log" 2>&1 ||
  fail "build failed: $(first_error "$logs/build.log") ($logs/build.log)"
say "built in $((SECONDS - t0)) s"

# 3. Every chapter in reading order (chapters/CMakeLists.txt, ATTN_CHAPTERS), under qemu.
mapfile -t chapters < <(chapter_list)
((${#chapters[@]})) || fail "no chapters found in chapters/CMakeLists.txt"
# Chapter 12's default run trains 3,000 steps of a model of 0.7 million parameters: 80 s on
# two native cores, well over an hour under qemu. It runs with --quick, the test command's run.
for chapter in "${chapters[@]}"; do
  t0=$SECONDS
  options=(--no-plots)
  [[ $chapter == 12_language_model ]] && options+=(--quick)
  qemu-aarch64-static "$dir/bin/$chapter" "${options[@]}" >"$logs/chapters/$chapter.txt" 2>&1 ||
    fail "chapter $chapter failed under qemu (exit $?): $logs/chapters/$chapter.txt"
  say "chapter $chapter ran in $((SECONDS - t0)) s"
done

# 4. The release tests, less the slow ones.
exclude=$(IFS='|'; echo "${slow_tests[*]}|${qemu_limits[*]}")
say "release tests under qemu (log: $logs/test.log)"
t0=$SECONDS
code=0
# A test that hangs under emulation fails after 10 minutes instead of stalling the matrix.
ctest --test-dir "$dir" -LE '^exercise$' -E "^($exclude)\$" -j "$jobs" --timeout 600 \
  --output-on-failure --no-tests=error >"$logs/test.log" 2>&1 || code=$?
summary=$(grep -E '^[0-9]+% tests passed' "$logs/test.log" | tail -1)
[[ $summary =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]] ||
  fail "no test summary (exit $code): $logs/test.log"
failed=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
tests="$((total - failed))/$total release tests under qemu in $((SECONDS - t0)) s"
left_out=$(ctest --test-dir "$dir" -N -LE '^exercise$' | grep -oE '[0-9]+$' | tail -1)
tests+=" ($((left_out - total)) left out: too slow under qemu or qemu's own limits)"
detail="GCC $gcc cross, built warning-free; ${#chapters[@]}/${#chapters[@]} chapters ran"
detail+=" with --no-plots (12 with --quick); $tests"
if ((code != 0)); then
  # ctest's closing list: "  12 - Suite.Name (Failed)".
  names=$(sed -n '/tests FAILED:/,$p' "$logs/test.log" | grep -oE ' - [^ ]+' | cut -c4- | xargs)
  fail "$detail; failed: ${names:-see the log} ($logs/test.log)"
fi
echo "$detail"
