#!/usr/bin/python3
"""The harness keeps its rooms: no folder of harness/ holds more than 15 source files, and no
function there runs over 100 lines unless a comment right above it says why.
  check_harness_layout.py SOURCE_DIR"""
import pathlib
import sys

MAX_FILES = 15
MAX_LINES = 100


def long_functions(path):
    """(line, length) of each top-level function over MAX_LINES without a comment above it."""
    lines = path.read_text().split("\n")
    out, start = [], None
    for i, line in enumerate(lines):
        opens = line and line[0] not in " }#/" and not line.startswith(
            ("namespace", "using", "template", "class", "struct", "enum", "extern"))
        if opens and start is None:
            start = i
        if line.startswith("}"):
            if start is not None and i - start + 1 > MAX_LINES and "{" in "".join(
                    lines[start:start + 6]):
                if start == 0 or not lines[start - 1].startswith("//"):
                    out.append((start + 1, i - start + 1))
            start = None
        if line.endswith(";") and line and line[0] != " " and start == i:
            start = None
    return out


def main():
    root = pathlib.Path(sys.argv[1]) / "harness"
    problems = []
    for folder in sorted(p for p in root.rglob("*") if p.is_dir()) + [root]:
        sources = [f for f in folder.iterdir() if f.suffix in (".cpp", ".h")]
        if len(sources) > MAX_FILES:
            problems.append(f"{folder.relative_to(root.parent)}: {len(sources)} source files "
                            f"(at most {MAX_FILES}: give it rooms)")
    for f in sorted(root.rglob("*.cpp")):
        for line, length in long_functions(f):
            problems.append(f"{f.relative_to(root.parent)}:{line}: a function of {length} lines "
                            f"with no comment above it saying why (split it into named steps)")
    for p in problems:
        print(p)
    if not problems:
        print("harness layout: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
