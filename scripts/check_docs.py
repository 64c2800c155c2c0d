#!/usr/bin/env python3
"""Keeps README.md and docs/*.md true to the binary (scripts/check_docs.sh runs it; scripts/test.sh runs that).

- Every `h3-engine ...` command in a sh/bash/plain code block is checked against the binary's own parser: the
  command (and a `bench` sub-command) must exist and every `--flag` must be one its `--help` lists.
- The code blocks marked `<!-- docs-check: run -->` (the runnable examples: tiny or demo model, CPU) are executed,
  one scratch folder per page, with `h3-engine` on PATH being the built binary.
- Relative links (README and docs) must name existing files, and `#anchors` existing headings.
- README.md has at most 150 lines; README.md and docs/*.md lines at most 120 characters.

usage: check_docs.py H3_ENGINE_BINARY WORK_DIR [--no-run] [--only PAGE]
"""
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_MARK = "<!-- docs-check: run -->"
MAX_README_LINES = 150
MAX_WIDTH = 120
RUN_TIMEOUT_S = 300
SHELL_PREFIXES = {"do", "then", "else", "time", "exec", "nohup", "nice", "!", "{"}

errors = []


def error(where, msg):
    errors.append(f"{where}: {msg}")


def pages():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


# ---- markdown --------------------------------------------------------------------------------------------
def code_blocks(path):
    """(first line number, info string, lines, marked to run) for every fenced block."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        info, start = m.group(2), i + 1
        marked = i > 0 and lines[i - 1].strip() == RUN_MARK
        j = start
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        blocks.append((start + 1, info, lines[start:j], marked))
        i = j + 1
    return blocks


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s, flags=re.UNICODE)
    return s.replace(" ", "-")


def anchors(path):
    out, fence = set(), False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def check_links_and_width():
    for page in pages():
        rel = page.relative_to(ROOT)
        text = page.read_text(encoding="utf-8")
        lines = text.split("\n")
        if page.name == "README.md" and len(lines) - (1 if text.endswith("\n") else 0) > MAX_README_LINES:
            error(rel, f"{len(lines) - 1} lines, more than {MAX_README_LINES}")
        for n, line in enumerate(lines, 1):
            if len(line) > MAX_WIDTH:
                error(f"{rel}:{n}", f"line of {len(line)} characters (at most {MAX_WIDTH})")
        fence = False
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http(s), mailto: not checked (no network in CI)
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                if not dest.exists():
                    error(f"{rel}:{n}", f"link to a missing file: {target}")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    error(f"{rel}:{n}", f"link to a missing heading: {target}")


# ---- commands against the parser -------------------------------------------------------------------------
class Cli:
    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def help(self, words):
        key = tuple(words)
        if key not in self.cache:
            r = subprocess.run([self.binary, *words, "--help"], capture_output=True, text=True, timeout=60)
            self.cache[key] = (r.returncode, r.stdout + r.stderr)
        return self.cache[key]

    def options(self, words):
        """(flags, subcommands, flags that take a value) of `h3-engine WORDS --help`."""
        rc, text = self.help(words)
        flags, subs, valued = set(), set(), set()
        in_subs = False
        for line in text.split("\n"):
            # CLI11's "Subcommands:", or the named groups `h3-engine --help` lists them in
            if re.match(r"^\s*(subcommands|commands|developer tools):?\s*$", line, re.I):
                in_subs = True
                continue
            m = re.match(r"^\s+((?:-\w,\s*)?--[\w-]+(?:,\s*-{1,2}[\w-]+)*)(\s+\S+)?", line)
            if m:
                names = re.findall(r"--[\w-]+", m.group(1))
                flags.update(names)
                value = (m.group(2) or "").strip()
                if value and re.match(r"^[A-Z:\[<]", value) and not value.startswith("Print"):
                    valued.update(names)
                in_subs = False
                continue
            if in_subs:
                m = re.match(r"^\s+([a-z][\w-]*)(\s|$)", line)
                if m:
                    subs.add(m.group(1))
                elif line.strip() and not line.startswith(" "):
                    in_subs = False
        return rc, flags, subs, valued


def logical_lines(block_lines):
    """Joins backslash continuations; yields (offset, text)."""
    buf, first = "", None
    for k, line in enumerate(block_lines):
        if first is None:
            first = k
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield first, buf + line
        buf, first = "", None
    if buf:
        yield first, buf


def simple_commands(line):
    """The simple commands of a shell line (split at | ; & && || and $( ), comments dropped). A synopsis line
    (`h3-engine generate [--size WxH|--aspect W:H] ...`) is one command whose | are alternatives."""
    if re.search(r"\[-", line):
        return [line.split(" #")[0].split()]
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:
        return [line.split()]
    cmds, cur = [], []
    for t in tokens:
        if t and set(t) <= set(";&|()"):
            if cur:
                cmds.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        cmds.append(cur)
    return cmds


def flags_in(token):
    """--flags in a token of a real command or of a synopsis ([--a X], --a|--b, --a=X)."""
    return re.findall(r"(?:^|[\[|(])(--[a-z][a-z0-9-]*)", token)


def check_command(cli, where, words):
    # skip shell keywords, environment assignments and the binary's name
    while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in SHELL_PREFIXES):
        words = words[1:]
    if not words or not re.match(r"^(\S*/)?h3-engine$", words[0]):
        return False
    words = words[1:]
    _, top_flags, top_subs, top_valued = cli.options([])
    i = 0
    while i < len(words) and words[i].startswith("-"):
        flag = words[i].split("=")[0]
        if flag not in top_flags:
            error(where, f"h3-engine has no global option {flag}")
        i += 2 if (flag in top_valued and "=" not in words[i]) else 1
    if i >= len(words):
        return True
    sub = words[i]
    if sub not in top_subs:
        error(where, f"h3-engine has no command '{sub}' (it has: {', '.join(sorted(top_subs))})")
        return True
    path = [sub]
    rc, flags, subs, _ = cli.options(path)
    rest = words[i + 1:]
    if subs and rest and not rest[0].startswith("-") and not rest[0].startswith("["):
        alternatives = rest[0].split("|")
        missing = [a for a in alternatives if a not in subs]
        if missing:
            error(where, f"'h3-engine {sub}' has no sub-command {', '.join(missing)}")
            return True
        # a synopsis naming several sub-commands: a flag must belong to one of them
        flags = set()
        for a in alternatives:
            flags |= cli.options(path + [a])[1]
        path.append(rest[0])
        rest = rest[1:]
    for token in rest:
        for flag in flags_in(token):
            if flag not in flags and flag not in top_flags:
                error(where, f"'h3-engine {' '.join(path)}' has no option {flag}")
    return True


def check_commands(cli):
    count = 0
    for page in pages():
        rel = page.relative_to(ROOT)
        for start, info, lines, _ in code_blocks(page):
            if info not in ("", "sh", "bash", "console"):
                continue
            for offset, line in logical_lines(lines):
                for words in simple_commands(line):
                    if check_command(cli, f"{rel}:{start + offset}", words):
                        count += 1
    return count


# ---- runnable examples -------------------------------------------------------------------------------------
def run_examples(binary, work, only):
    bindir = work / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / "h3-engine"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path(binary).resolve())
    build_dir = Path(binary).resolve().parent.parent.parent  # <build>/src/cli/h3-engine
    # Debian's python3 first: the module is built for it (and numpy is Debian's), as docs/python.md says
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:{os.environ.get('PATH', '')}", OMP_NUM_THREADS="2")
    ran = 0
    for page in pages():
        if only and page.name != only:
            continue
        marked = [b for b in code_blocks(page) if b[3]]
        if not marked:
            continue
        scratch = work / page.stem
        subprocess.run(["rm", "-rf", str(scratch)], check=True)
        scratch.mkdir(parents=True)
        # the page's relative paths as from the repository root: the demo model and the build's Python module
        (scratch / "models").symlink_to(ROOT / "models")
        (scratch / "build").symlink_to(build_dir)
        for start, _, lines, _ in marked:
            where = f"{page.relative_to(ROOT)}:{start}"
            script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
            t0, c0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
            try:
                r = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True,
                                   timeout=RUN_TIMEOUT_S)
                rc, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                rc, out = "timeout", ""
            dt, c1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
            ran += 1
            status = "ok" if rc == 0 else f"FAILED ({rc})"
            print(f"check_docs: ran {where} ({dt:.1f} s, {cpu:.1f} s CPU): {status}", flush=True)
            if rc != 0:
                error(where, f"the example exited {rc}:\n{out[-3000:]}")
    return ran


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, work = args[0], Path(args[1]).resolve()
    run = "--no-run" not in args
    only = args[args.index("--only") + 1] if "--only" in args else None
    if not os.access(binary, os.X_OK):
        print(f"check_docs: {binary} is not an executable", file=sys.stderr)
        return 2
    check_links_and_width()
    cli = Cli(binary)
    n = check_commands(cli)
    print(f"check_docs: {n} h3-engine commands checked against the parser, links and widths of "
          f"{len(pages())} pages", flush=True)
    ran = run_examples(binary, work, only) if run else 0
    for e in errors:
        print(f"check_docs: {e}", file=sys.stderr)
    print(f"check_docs: {ran} examples run, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
