"""No CLI flag below the CLI: string literals in src/model, src/runtime, src/pipeline and src/ops (the errors
and messages HTTP and Python users read) must not name a command-line flag ("--sp", "--dtype fp16"). Errors
name the field (Status::field); each front end maps it to its own spelling (issue #43).

Usage: flag_literals.py SOURCE_ROOT  — prints each offending literal with file:line, exits 1 when any.
"""
import os
import re
import sys

LAYERS = ("src/model", "src/runtime", "src/pipeline", "src/ops")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def literals(text):
    """(line, literal body) of every ordinary string literal outside comments."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == "'":  # a character literal ('"' must not open a string)
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            yield line, text[k + 1:j]
            line += text.count("\n", i, j)
            i = j + len(delim)
        elif c == '"':
            j, start = i + 1, line
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            yield start, text[i + 1:j]
            i = j + 1
        else:
            i += 1


def main(root):
    bad = []
    for layer in LAYERS:
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(d, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for line, lit in literals(text):
                    if FLAG.search(lit):
                        bad.append(f"{os.path.relpath(path, root)}:{line}: \"{lit}\"")
    for b in bad:
        print(b)
    print(f"flag literals below the CLI: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
