#!/usr/bin/env bash
# Rewrites the copy of every code excerpt on the chapter pages from the chapter's main.cpp: the
# lines between its two `// [name]` markers, below the page's `<!-- snippet: main.cpp name -->`
# and up to `<!-- end snippet -->` (the format: docs/md_filter.pl). GitHub shows the copy, the
# site pulls the region itself. md_filter.pl --check (the `docs` target) and the test
# snippets_are_current fail until this is run after a region changed; pages change only where
# a copy does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
perl docs/md_filter.pl --expand chapters/*/README.md
