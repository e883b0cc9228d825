#!/usr/bin/env bash
# Regenerates every reference fixture in tests/data from PyTorch/NumPy (Debian's python3-torch,
# installed by `scripts/setup.sh --torch`). The fixtures are committed; the tests never run this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --torch
# Each script writes into a folder of its own name: tests/data/backward/ is backward.py's.
for script in scripts/fixtures/*.py; do
  folder=tests/data/$(basename "$script" .py)
  echo "fixtures: $script -> $folder"
  mkdir -p "$folder"
  /usr/bin/python3 "$script" "$folder"
done
