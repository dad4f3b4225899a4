#!/usr/bin/python3
"""The harness keeps its rooms: no folder of harness/ holds more than 15 source files; and no
function in harness/, reports/, compiler/ or plugins/ (at the top level or defined inside a class)
runs over 100 lines unless a comment right above it says why (a table, say).
  check_harness_layout.py SOURCE_DIR"""
import pathlib
import sys

MAX_FILES = 15
MAX_LINES = 100


KEYWORDS = ("namespace", "using", "template", "class", "struct", "enum", "extern", "public:",
            "private:", "protected:", "friend", "static_assert", "typedef")


def long_bodies(lines, indent, first, last):
    """(line, length) of each function opened at `indent` spaces within lines[first:last] that runs
    over MAX_LINES without a comment right above it."""
    out, start = [], None
    pad = " " * indent
    for i in range(first, last):
        line = lines[i]
        at_indent = line.startswith(pad) and line[indent:indent + 1] not in ("", " ")
        opens = at_indent and line[indent] not in "}#/" and not line[indent:].startswith(KEYWORDS)
        if opens and start is None:
            start = i
        if at_indent and line[indent] == "}":
            if start is not None and i - start + 1 > MAX_LINES and "{" in "".join(
                    lines[start:start + 6]):
                if start == 0 or not lines[start - 1].strip().startswith("//"):
                    out.append((start + 1, i - start + 1))
            start = None
        # A declaration, or a function whose body closes on its own line.
        if at_indent and start == i and (line.endswith(";") or line.rstrip().endswith("}")):
            start = None
    return out


def long_functions(path):
    """Top-level functions, and functions defined inside a top-level class or struct."""
    lines = path.read_text().split("\n")
    out = long_bodies(lines, 0, 0, len(lines))
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("class ", "struct ")) and not line.endswith(";"):
            end = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("};")),
                       len(lines))
            out += long_bodies(lines, 2, i + 1, end)
            i = end
        i += 1
    return sorted(set(out))


def main():
    root = pathlib.Path(sys.argv[1]) / "harness"
    problems = []
    for folder in sorted(p for p in root.rglob("*") if p.is_dir()) + [root]:
        sources = [f for f in folder.iterdir() if f.suffix in (".cpp", ".h")]
        if len(sources) > MAX_FILES:
            problems.append(f"{folder.relative_to(root.parent)}: {len(sources)} source files "
                            f"(at most {MAX_FILES}: give it rooms)")
    for tree in ("harness", "reports", "compiler", "plugins"):
        for f in sorted((root.parent / tree).rglob("*.cpp")):
            for line, length in long_functions(f):
                problems.append(f"{f.relative_to(root.parent)}:{line}: a function of {length} "
                                f"lines with no comment above it saying why (split it into named "
                                f"steps)")
    for p in problems:
        print(p)
    if not problems:
        print("harness layout: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
