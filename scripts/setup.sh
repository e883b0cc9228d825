#!/usr/bin/env bash
# Installs, from Debian's archive, whatever the course needs and this machine lacks.
# Safe to run again: when everything is present it installs nothing and says so.
#
#   scripts/setup.sh            the packages to build, run, plot, test and document the course
#   scripts/setup.sh --torch    also python3-torch, needed only to regenerate tests/data fixtures
set -euo pipefail

packages=(
  cmake g++ make                  # the build
  libeigen3-dev                   # all linear algebra
  libcli11-dev libfmt-dev         # options and formatted text of every chapter
  nlohmann-json3-dev              # the manifest.json of every --dump folder
  libgtest-dev libbenchmark-dev   # tests and the performance measurements
  gnuplot-nox                     # every figure
  doxygen graphviz libjs-mathjax  # the site, with formulas typeset offline
  chromium chromium-driver python3-selenium  # the site checked in a real browser (check_site.py)
  python3-numpy                   # the .npy round-trip test proves the format against NumPy itself
  clang                           # the sanitize preset, and scripts/fuzz.sh (libFuzzer: GCC has none)
  clang-format                    # the sources' layout, checked by the tests (scripts/check_format.sh)
  libomp-dev                      # OpenMP for clang++ (g++ brings its own libgomp)
  bible-kjv                       # chapter 12's corpus: the King James Bible, public domain
  libclang-rt-dev                 # clang's ASan/UBSan and libFuzzer runtimes (libclang-rt-14-dev)
)
if [[ "${1:-}" == "--torch" ]]; then
  packages+=(python3-torch)       # only for scripts/make_fixtures.sh; the test run never needs it
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} Debian packages are already installed"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

# Another apt (unattended-upgrades, a second terminal) may hold the dpkg lock: wait, don't fail.
apt_opts=(-o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
echo "setup: installing from Debian's archive: ${missing[*]}"
# sudo drops the environment, so the non-interactive frontend is passed through env(1).
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get)
"${apt[@]}" -o DPkg::Lock::Timeout=600 -q update >/dev/null
"${apt[@]}" install "${apt_opts[@]}" "${missing[@]}" >/dev/null
echo "setup: installed ${#missing[@]} package(s)"
