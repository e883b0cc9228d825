#!/usr/bin/python3
"""The lesson share of every chapter's main.cpp: how much of it is the lecture.

    /usr/bin/python3 scripts/lesson_share.py            a line per chapter, and the lowest
    /usr/bin/python3 scripts/lesson_share.py --lines 05_masking
                                                        the file, each line marked L or P

Share = lesson lines / non-blank lines. A non-blank line is a lesson line (L) when it
computes what the chapter teaches, narrates it (ch.step, say, show, notice, prose, flow,
finish) or comments on it. It is plumbing (P) when it is one of:

  1. a preprocessor line (#include, #pragma, ...);
  2. namespace and using lines (`namespace {`, `}  // namespace`, `using attn::Matrix;`);
  3. int main(...) to its closing brace: the knobs' declarations and the call of run();
  4. the struct that holds the knobs (`struct Knobs {` to `};`);
  5. a statement that writes files or reads the command line rather than teaching: it starts
     with ch.dump, ch.dumper, course::save_, course::load_, ch.given (and its continuation
     lines count with it);
  6. a function of the file whose name says it handles input or files: parse_*, read_*,
     write_*, save_*, load_*, check_*, *_problem (its comment lines above it too);
  7. a statement that lays out a figure rather than computing what it shows: it starts with
     ch.plot() or calls a draw_* function (its continuation lines count with it).

Comment lines count as lesson except inside a plumbing block (3, 4, 6). Blank lines count for
neither. Exits 0; it measures, it does not judge (the bar is in the issue: at least 65%).
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUMBING_FUNCTION = re.compile(
    r"^[A-Za-z][\w:<>,\s\*&]*?\s(?:parse_\w+|read_\w+|write_\w+|save_\w+|load_\w+|check_\w+|\w+_problem)\s*\(")
PLUMBING_STATEMENT = re.compile(
    r"^\s*(?:ch\.dump\(|ch\.dumper\(|course::save_|course::load_|.*\bch\.given\(|ch\.plot\(\)"
    r"|(?:if \(.*\) )?(?:\w+::)?draw_\w+\()")


def chapters():
    text = (ROOT / "chapters" / "CMakeLists.txt").read_text()
    block = text[text.index("set(ATTN_CHAPTERS"):text.index("CACHE INTERNAL")]
    return re.findall(r"^\s+(\d\d_\w+)\s*$", block, re.M)


def classify(lines):
    """One mark per line: 'L' lesson, 'P' plumbing, '' blank."""
    marks = [""] * len(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        # Blocks that are plumbing from their first line to the closing brace at column 0
        # (a function) or "};" (the knobs' struct), with the comment lines right above them.
        if (line.startswith("int main(") or line.startswith("struct Knobs")
                or PLUMBING_FUNCTION.match(line)):
            start = i
            while start > 0 and lines[start - 1].startswith("//"):
                start -= 1
            end = i
            while end < len(lines) and not (lines[end].startswith("}")):
                end += 1
            for k in range(start, min(end + 1, len(lines))):
                if lines[k].strip():
                    marks[k] = "P"
            i = end + 1
            continue
        if (stripped.startswith("#") or stripped.startswith("namespace")
                or stripped.startswith("}  // namespace") or stripped.startswith("using ")):
            marks[i] = "P"
            i += 1
            continue
        if PLUMBING_STATEMENT.match(line):
            # The statement and its continuation lines, up to the one that ends it.
            while i < len(lines):
                if lines[i].strip():
                    marks[i] = "P"
                if lines[i].rstrip().endswith(";") or lines[i].rstrip().endswith("{"):
                    break
                i += 1
            i += 1
            continue
        marks[i] = "L"
        i += 1
    return marks


def main(argv):
    if len(argv) >= 2 and argv[0] == "--lines":
        lines = (ROOT / "chapters" / argv[1] / "main.cpp").read_text().split("\n")
        for mark, line in zip(classify(lines), lines):
            print(f"{mark or ' '} {line}")
        return 0
    if argv:
        print(__doc__.split("\n\n")[0].strip(), file=sys.stderr)
        return 2
    print(f"{'chapter':26} {'lines':>5} {'non-blank':>9} {'lesson':>6} {'share':>6}")
    lowest = None
    for chapter in chapters():
        lines = (ROOT / "chapters" / chapter / "main.cpp").read_text().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        marks = classify(lines)
        counted = sum(1 for m in marks if m)
        lesson = sum(1 for m in marks if m == "L")
        share = lesson / counted if counted else 0.0
        lowest = share if lowest is None else min(lowest, share)
        print(f"{chapter:26} {len(lines):5} {counted:9} {lesson:6} {share:6.1%}")
    print(f"lowest share: {lowest:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
