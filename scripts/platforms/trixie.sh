#!/usr/bin/env bash
# Platform row "trixie": the README's first command, scripts/course.sh, end to end on Debian 13
# (GCC 14 and its Eigen, CLI11, {fmt}, nlohmann-json, gnuplot, Doxygen) in a chroot, the way a
# learner on trixie runs it: a fresh clone, root, course.sh installing its own packages.
#
#   bash scripts/platforms/trixie.sh                            the committed HEAD, cloned
#   PLATFORM_SOURCE=worktree bash scripts/platforms/trixie.sh   the working tree, copied
#
# The clone takes the committed HEAD, so uncommitted changes are NOT tested by default;
# PLATFORM_SOURCE=worktree copies the working tree instead (without build/ and plots/), to try a
# change before it is committed.
#
# The chroot (build/platforms/trixie/root) is made once by debootstrap from the mirror this
# machine's apt already uses, and reused: apt's cache inside it keeps later runs quick. Delete
# the folder to start from a bare trixie again. Prints its detail for the matrix as its last
# line; exits non-zero when a step fails, naming the step and its log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$(pwd)
dir=$repo/build/platforms/trixie
logs=build/platforms/trixie/logs
root=$dir/root
suite=trixie
marker=$root/.platform-complete  # written last: a root without it is an interrupted debootstrap
mkdir -p "$logs"

fail() {
  echo "$*"
  exit 1
}
say() { echo "trixie: $*"; }

mounted() { grep -c " $root/" /proc/mounts || true; }

# Leaves nothing mounted, on success, failure or Ctrl-C alike: a mount left behind would keep
# the host's /dev inside a folder that the next run may delete. Silent, so that the detail
# stays the last line.
unmount_all() {
  local m
  for m in "$root/dev" "$root/proc"; do
    mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done
  return 0
}
trap unmount_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Removes a folder inside the chroot only when nothing is mounted there (never the host's /dev).
remove() {
  unmount_all
  (($(mounted) == 0)) || fail "something is still mounted under $root; not removing $1"
  rm -rf --one-file-system "$1"
}

apt_install() {
  apt-get -o DPkg::Lock::Timeout=600 -q update >"$logs/apt.log" 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=600 -y -q \
      --no-install-recommends "$@" >>"$logs/apt.log" 2>&1 ||
    fail "apt-get install $* failed: $logs/apt.log"
}

# The Debian mirror of this machine's own apt sources (the entry for its release, not the
# security archive), in either format: one-line "deb URI SUITE" or deb822 stanzas.
mirror_host() {
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  {
    awk -v s="$codename" '$1 == "deb" { sub(/\[[^]]*\] */, ""); if ($3 == s) print $2 }' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    awk -v s="$codename" '
      function flush() {
        if (deb && (" " suites " ") ~ (" " s " ")) print uris
        deb = 0; uris = suites = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^Types:/ { deb = / deb( |$)/ }
      /^URIs:/ { uris = $2 }
      /^Suites:/ { $1 = ""; suites = $0 }
      END { flush() }' /etc/apt/sources.list.d/*.sources 2>/dev/null
  } | head -n1
}

# 1. The chroot, made once.
if [[ ! -f $marker ]]; then
  command -v debootstrap >/dev/null || apt_install debootstrap
  mirror=$(mirror_host)
  [[ -n $mirror ]] || fail "no Debian mirror found in /etc/apt/sources.list{,.d}"
  [[ -e $root ]] && remove "$root"
  say "debootstrap $suite from $mirror (first run only: a few minutes)"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$logs/debootstrap.log" 2>&1 ||
    fail "debootstrap failed: $logs/debootstrap.log"
  echo "$suite $mirror $(date -u +%F)" >"$marker"
else
  say "reusing the chroot ($(cat "$marker"))"
fi

# 2. The course inside it: a fresh clone of HEAD, or the working tree when asked.
src=$root/root/course
[[ -e $src ]] && remove "$src"
case ${PLATFORM_SOURCE:-clone} in
  clone)
    git clone -q --no-hardlinks "$repo" "$src" >"$logs/clone.log" 2>&1 ||
      fail "git clone failed: $logs/clone.log"
    what="a fresh clone of HEAD $(git -C "$src" rev-parse --short HEAD)"
    ;;
  worktree)
    mkdir -p "$src/plots"
    tar -C "$repo" --exclude=./build --exclude=./plots --exclude=./.git -cf - . |
      tar -C "$src" -xf - || fail "copying the working tree failed"
    cp plots/README.md "$src/plots/" 2>/dev/null || true  # the one file of plots/ in git
    what="the working tree of $(git rev-parse --short HEAD) with its uncommitted changes"
    ;;
  *) fail "PLATFORM_SOURCE must be clone or worktree, not '$PLATFORM_SOURCE'" ;;
esac
say "course from $what"

# 3. scripts/course.sh as root inside the chroot: apt needs /proc, /dev and a resolver.
{ mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" &&
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"; } ||
  fail "could not mount /proc and /dev in $root"
say "running scripts/course.sh in the chroot (log: $logs/course.log)"
t0=$SECONDS
code=0
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c 'cd /root/course && bash scripts/course.sh' >"$logs/course.log" 2>&1 || code=$?
seconds=$((SECONDS - t0))
gcc=$(chroot "$root" g++ -dumpfullversion 2>/dev/null || echo "?")
unmount_all
(($(mounted) == 0)) || fail "mounts left under $root after unmounting: see /proc/mounts"
if ((code != 0)); then
  # course.sh ends a failed step with "FAILED: <step>" and "first error: <line>".
  step=$(grep -m1 -oE 'FAILED: .*' "$logs/course.log" | cut -d' ' -f2- || true)
  error=$(grep -m1 -oE 'first error: .*' "$logs/course.log" | cut -d' ' -f3- |
            sed -E 's|/root/course/||; s/‘[^’]{40,}’/‘...’/' | cut -c1-200 || true)
  fail "GCC $gcc: course.sh failed (exit $code)${step:+ in '$step'}${error:+: $error}" \
    "($logs/course.log)"
fi

# 4. What a learner is told to open: the site and the figures, every chapter's.
[[ -s $src/build/release/docs/html/index.html ]] ||
  fail "GCC $gcc: course.sh exited 0 but built no site index: $logs/course.log"
mapfile -t chapters < <(cd "$src/chapters" && ls -d [0-9][0-9]_*/ | tr -d /)
for chapter in "${chapters[@]}"; do
  compgen -G "$src/plots/${chapter:0:2}_*.png" >/dev/null ||
    fail "GCC $gcc: course.sh exited 0 but chapter $chapter drew no figure: $logs/course.log"
done
figures=$(find "$src/plots" -name '*.png' | wc -l)
echo "Debian $(cat "$root/etc/debian_version"), GCC $gcc, course.sh end to end in $seconds s" \
  "($what): ${#chapters[@]} chapters, $figures figures, site built"
