#!/usr/bin/env bash
# Regenerates every reference fixture in tests/data from PyTorch/NumPy (Debian's python3-torch,
# installed by `scripts/setup.sh --torch`). The fixtures are committed; the tests never run this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --torch
for script in scripts/fixtures/*.py; do
  echo "fixtures: $script"
  /usr/bin/python3 "$script" tests/data
done
