# Shared by the scripts in scripts/ (sourced, not run).

started=$SECONDS
jobs=$(nproc)

# Warnings are errors in the developers' gate only: .ci/run (CI=true) and a developer who asks
# (ATTN_WERROR=ON). On a learner's machine another compiler, Eigen or CPU may warn where ours
# does not, and that must not stop the course; every configure below says which it is, so a
# value cached by an earlier run is never kept by accident.
if [[ ${CI:-} == true || ${ATTN_WERROR:-} == ON ]]; then
  werror=ON
else
  werror=OFF
fi

# step "Title": a bold heading with the time since the script started.
step() { printf '\n\033[1m## %s\033[0m (%s)\n' "$*" "$(minutes $((SECONDS - started)))"; }

# minutes SECONDS: "1:05".
minutes() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# The first line of a log that says what went wrong: a compiler's or linker's error, CMake's,
# or else the log's last line.
first_error() {
  grep -m1 -E ': (fatal )?error:|undefined reference|CMake Error|^make.*Error|error:' "$1" ||
    tail -n1 "$1"
}

# explain_failure LOG WHAT TRY: the plain account of a failed step, on stderr: what failed, the
# compiler where it was a build (LOG is <build dir>/logs/NAME.log), the first error, where the
# whole log is, what to try.
explain_failure() {
  local log=$1 what=$2 try=$3 cxx dir
  dir=$(dirname "$(dirname "$log")")
  {
    printf '\n  FAILED: %s\n' "$what"
    if [[ -f $dir/CMakeCache.txt ]]; then
      cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
      [[ -n $cxx ]] && printf '  compiler: %s\n' "$("$cxx" --version 2>/dev/null | head -n1)"
    fi
    printf '  first error: %s\n' "$(first_error "$log" | cut -c1-300)"
    printf '  the whole log: %s\n' "$log"
    [[ -n $try ]] && printf '%s\n' "$try"
  } >&2
}

# quietly LOG command...: runs the command with its output in LOG, prints one line when it
# succeeds, and a short account of the failure (explain_failure) when it does not; the advice
# on another build (on_failure) only where configuring or compiling failed.
quietly() {
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  local t0=$SECONDS
  if "$@" >"$log" 2>&1; then
    printf '  done in %s (log: %s)\n' "$(minutes $((SECONDS - t0)))" "$log"
  else
    local code=$? try=""
    [[ $log == */configure.log || $log == */build.log ]] && try=${on_failure:-}
    explain_failure "$log" "$*" "$try"
    exit "$code"
  fi
}

# build_with_progress LOG BUILD_DIR TARGET...: builds the targets with make's output in LOG,
# and shows the learner what is being compiled, how far along the build is and roughly how
# long is left. The count comes from a dry run (`make -n` names each object it would
# compile); the time left weighs each object by how long it took to compile on the course's
# own machine (scripts/compile_seconds.tsv), scaled by how fast this machine has been so far.
build_with_progress() {
  local log=$1 dir=$2
  shift 2
  local targets=("$@")
  mkdir -p "$(dirname "$log")"
  local -A cost=()
  local file seconds
  if [[ -f scripts/compile_seconds.tsv ]]; then
    while read -r file seconds; do
      [[ $file == \#* || -z $file ]] || cost[$file]=$seconds
    done <scripts/compile_seconds.tsv
  fi
  local default_cost=8  # a source the table does not know: about a library file's cost

  # The objects this build will compile, as make names them.
  local -a todo=()
  # (-k: a library not built yet stops a plain dry run before the programs that link it.)
  mapfile -t todo < <(cmake --build "$dir" --target "${targets[@]}" -- -n -k 2>/dev/null |
                        sed -n 's/.*Building CXX object \([^"]*\)\.o.*/\1/p' | sort -u)
  local total=${#todo[@]} total_cost=0 object
  local -A object_cost=()
  for object in "${todo[@]}"; do
    object_cost[$object]=$(object_cost_of "$object")
    total_cost=$((total_cost + object_cost[$object]))
  done
  if ((total == 0)); then
    echo "  nothing to compile: every target is up to date"
  else
    printf '  %d file%s to compile with %d jobs; about %s on a machine like the course'"'"'s\n' \
      "$total" "$( ((total == 1)) || echo s)" "$jobs" \
      "$(minutes $(( (total_cost + jobs - 1) / jobs )))"
  fi

  local t0=$SECONDS done_cost=0 count=0 started_cost=0 this_cost line tty=0
  [[ -t 1 ]] && tty=1
  set +e
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}" 2>&1 | tee "$log" | {
    while IFS= read -r line; do
      case $line in
        *"Building CXX object "*)
          object=$(sed 's/.*Building CXX object \(.*\)\.o$/\1/' <<<"$line")
          count=$((count + 1))
          this_cost=${object_cost[$object]:-$(object_cost_of "$object")}
          if ((count > total)); then  # one the dry run did not foresee: count it now
            total=$count
            total_cost=$((total_cost + this_cost))
          fi
          # make starts an object when a job frees up, so about everything started before this
          # one is done (all but the one or two still compiling beside it).
          started_cost=$((started_cost + this_cost))
          done_cost=$((started_cost - this_cost))
          progress_line "$count" "$total" "$object" $((SECONDS - t0)) "$done_cost" \
            "$total_cost" "$tty"
          ;;
        *"Linking CXX "*)
          ((tty)) && printf '\r\033[K'
          printf '  linked %s\n' "$(basename "${line##* }")"
          ;;
      esac
    done
    ((tty)) && printf '\r\033[K'
  }
  local code=${PIPESTATUS[0]}
  set -e
  if ((code != 0)); then
    explain_failure "$log" "the build in $dir" "${on_failure:-}"
    exit "$code"
  fi
  printf '  built in %s (log: %s)\n' "$(minutes $((SECONDS - t0)))" "$log"
}

# chapter_list: the chapters in reading order, one per line, from their one list (ATTN_CHAPTERS in
# chapters/CMakeLists.txt). Run from the repository's root.
chapter_list() {
  sed -n '/^set(ATTN_CHAPTERS/,/CACHE/p' chapters/CMakeLists.txt |
    grep -oE '^ +[0-9]{2}_[a-z0-9_]+' | tr -d ' '
}

# source_of OBJECT: the source an object is made from, as make names the object
# ("chapters/CMakeFiles/01_rnn.dir/01_rnn/main.cpp" is chapters/01_rnn/main.cpp). A folder of
# the libraries or of the tests compiled as one unit (ATTN_UNITY) is named by its files:
# ".../attn.dir/Unity/unity_ops_cxx.cxx" is common/attn/ops/*.cpp,
# "tests/CMakeFiles/test_attn_ops.dir/Unity/unity_0_cxx.cxx" tests/attn/ops/*.cpp.
source_of() {
  sed -E -e 's#^common/CMakeFiles/attn\.dir/Unity/unity_([a-z]+)_cxx\.cxx$#common/attn/\1/*.cpp#' \
    -e 's#^common/CMakeFiles/course\.dir/Unity/unity_[0-9]+_cxx\.cxx$#common/course/*.cpp#' \
    -e 's#^tests/CMakeFiles/test_attn_([a-z]+)\.dir/Unity/unity_[0-9]+_cxx\.cxx$#tests/attn/\1/*.cpp#' \
    -e 's#^tests/CMakeFiles/test_([a-z]+)\.dir/Unity/unity_[0-9]+_cxx\.cxx$#tests/\1/*.cpp#' \
    -e 's#^([^/]+)/CMakeFiles/[^/]+\.dir/#\1/#' <<<"$1"
}

# object_cost_of OBJECT: the table's seconds for the source of an object.
object_cost_of() {
  local source
  source=$(source_of "$1")
  echo "${cost[$source]:-$default_cost}"
}

# progress_line N TOTAL OBJECT ELAPSED DONE_COST TOTAL_COST TTY
progress_line() {
  local n=$1 total=$2 object=$3 elapsed=$4 done_cost=$5 total_cost=$6 tty=$7 left name
  name=$(source_of "$object")
  local remaining=$((total_cost > done_cost ? total_cost - done_cost : 0))
  if ((done_cost > 0 && elapsed > 10)); then
    # This machine's pace so far, applied to what remains.
    left="about $(minutes $((remaining * elapsed / done_cost))) left"
  else
    left="about $(minutes $((remaining / jobs))) left"
  fi
  local text
  text=$(printf '  [%2d/%d] %-44s %s elapsed, %s' "$n" "$total" "$name" "$(minutes "$elapsed")" \
           "$left")
  if ((tty)); then
    printf '\r\033[K%s' "$text"
  else
    printf '%s\n' "$text"
  fi
}

# parse_build_choice SCRIPT ARGS...: the build the learner chose (README, "If the build
# fails"), as preset, build_dir and build_what, and the advice a failure prints (on_failure).
# An option is honoured on every run it is given; none is remembered.
parse_build_choice() {
  local script=$1
  shift
  preset=release
  build_what="vectorised for this CPU with -march=native, g++"
  while (($#)); do
    case $1 in
      --portable) preset=portable; build_what="no -march=native, g++" ;;
      --clang) preset=clang; build_what="clang++, vectorised for this CPU with -march=native" ;;
      -h | --help) sed -n '2,/^set -euo/p' "scripts/$script" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: scripts/$script [--portable | --clang]   (--help says more)" >&2; exit 2 ;;
    esac
    shift
  done
  build_dir=build/$preset
  local again="bash scripts/$script"
  local pad=${again//?/ }
  on_failure="  to try:
    $again --portable   without -march=native (a compiler that does not know
    $pad              this CPU, or a fault in its vector code)
    $again --clang      with clang++ instead of g++ (a fault in this g++)
  and if it still fails, report it with the log and the compiler's version."
}
