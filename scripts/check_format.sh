#!/usr/bin/env bash
# Whether the C++ sources are laid out as .clang-format says: every .cpp and .hpp under
# chapters/, common/, tests/ and benchmarks/ (but tests/repository/format_defects/, whose files
# are wrong on purpose), or the FILES given. The test command runs it (ctest: format_is_clean).
#
#   scripts/check_format.sh [FILES...]
#
# Exit 0 when every file is laid out so; 1 naming each file that is not, with the command that
# lays it out. Not checked (exit 77, which ctest counts as skipped) where clang-format is
# missing or is not version 14, Debian 12's: other versions lay out some lines differently,
# and a learner's newer Debian must not fail a test over that.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v clang-format >/dev/null; then
  echo "check_format: not checked: clang-format is not installed (scripts/setup.sh installs it)"
  exit 77
fi
major=$(clang-format --version | sed -nE 's/.* version ([0-9]+)\..*/\1/p')
if [[ $major != 14 ]]; then
  echo "check_format: not checked: clang-format ${major:-of unknown version}, not 14 (Debian 12's)," \
       "lays out some lines otherwise"
  exit 77
fi

files=("$@")
if ((${#files[@]} == 0)); then
  mapfile -t files < <(find chapters common tests benchmarks \( -name '*.cpp' -o -name '*.hpp' \) \
                         -not -path 'tests/repository/format_defects/*' | sort)
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not laid out as .clang-format says:"
  printf '  %s\n' "${bad[@]}"
  echo "lay them out with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "check_format: all ${#files[@]} files are laid out as .clang-format says"
