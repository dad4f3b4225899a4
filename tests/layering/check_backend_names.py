#!/usr/bin/python3
"""The harness names no backend but the reference: a string literal that is exactly the name of a
plugin built in plugins/ (eager, the reference, excepted) is the harness acting on that backend by
name, where the plugin should declare what the harness needs (plugin::Declaration).
  check_backend_names.py SOURCE_DIR"""
import pathlib
import re
import sys

REFERENCE = "eager"
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def code_only(line):
    """The line without a // comment (one outside a string literal)."""
    out, in_string, i = [], False, 0
    while i < len(line):
        c = line[i]
        if in_string and c == "\\":
            out.append(line[i:i + 2])
            i += 2
            continue
        if c == '"':
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


def main(root):
    root = pathlib.Path(root)
    names = {p.name for p in (root / "plugins").iterdir()
             if p.is_dir() and p.name not in ("api", "loader")}
    names.discard(REFERENCE)
    found = {}
    for f in sorted((root / "harness").rglob("*")):
        if f.suffix not in (".cpp", ".h"):
            continue
        rel = f.relative_to(root / "harness").as_posix()
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for lit in LITERAL.findall(code_only(line)):
                if lit in names:
                    found.setdefault(rel, {}).setdefault(lit, []).append(n)
    bad = [f'harness/{rel}:{lines[0]}: acts on backend "{lit}" by name; let the plugin declare '
           f"what the harness needs" for rel, lits in found.items() for lit, lines in lits.items()]
    if not names:
        bad.append(f"{root}/plugins: no plugin folders found")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
