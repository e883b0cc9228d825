# Shared by scripts/course.sh and scripts/test.sh (sourced, not run).

started=$SECONDS
jobs=$(nproc)

# step "Title": a bold heading with the time since the script started.
step() { printf '\n\033[1m## %s\033[0m (%ds)\n' "$*" $((SECONDS - started)); }

# quietly LOG command...: runs the command with its output in LOG, prints one line when it
# succeeds, and the last 60 lines of LOG (where a compiler error is) when it fails.
quietly() {
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  local t0=$SECONDS
  if "$@" >"$log" 2>&1; then
    printf '  done in %ds (log: %s)\n' $((SECONDS - t0)) "$log"
  else
    local code=$?
    tail -n 60 "$log"
    printf '\n  FAILED (exit %d): %s\n  the whole log: %s\n' "$code" "$*" "$log" >&2
    exit "$code"
  fi
}
