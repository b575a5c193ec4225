#!/usr/bin/env python3
"""Checks that every ```cpp snippet of the docs compiles as written.

Usage: tools/check_doc_snippets.py [--build-dir build] [-I DIR ...] [FILE.md ...]
(default files: docs/api.md, README.md, docs/cluster.md and docs/observability.md; default include path: the repository
root and BUILD_DIR/gen, as the build compiles the library; -I replaces it, e.g. -I PREFIX/include/troupe
to check the snippets against an installed Troupe). Exits 1 if a snippet does not compile,
after reporting each failing one with the compiler's errors, whose lines are lines of the
markdown file.

How a snippet becomes a translation unit (compiled with -std=c++20 -fsyntax-only):
- A snippet that defines `main` is a whole program and is compiled as it is.
- Any other snippet is a fragment of a function body. Its lines starting with `#include` go
  to the top of the file, after the two headers every program includes
  ("actors/session.hpp" and "ops/all.hpp") and before `using namespace troupe;`; every other
  line goes, in order, into the body of `void snippet_N() { ... }`.
- Names a fragment uses without defining (a scope `root`, a `session`, a `loss`) come from
  its context: an HTML comment, which markdown renders as nothing, on the lines right before
  the opening fence:
      <!-- snippet-context: auto root = Scope::root(); Output x = ...; -->
  Its text (it may span lines) is placed at the start of the function body, before the
  snippet. Context lines starting with `#include` go to the top like the snippet's own.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ["docs/api.md", "README.md", "docs/cluster.md", "docs/observability.md"]
PRELUDE = ['#include "actors/session.hpp"', '#include "ops/all.hpp"']
CONTEXT_RE = re.compile(r"<!--\s*snippet-context:(.*?)-->", re.S)
MAIN_RE = re.compile(r"\bint\s+main\s*\(")


class Snippet:
    def __init__(self, path, index, fence_line, lines, context):
        self.path = path              # the markdown file, as given
        self.index = index            # 1-based, within its file
        self.fence_line = fence_line  # line of the opening ```cpp
        self.lines = lines            # [(markdown line number, text)]
        self.context = context        # [(markdown line number, text)]


def extract(path):
    """The ```cpp snippets of a markdown file, each with the context comment before it."""
    with open(path, encoding="utf-8") as f:
        text = f.read().split("\n")
    snippets = []
    i = 0
    while i < len(text):
        if text[i].strip() == "```cpp":
            fence = i + 1
            body = []
            i += 1
            while i < len(text) and text[i].strip() != "```":
                body.append((i + 1, text[i]))
                i += 1
            if i == len(text):
                sys.exit(f"{path}:{fence}: the ```cpp block is never closed")
            snippets.append(Snippet(path, len(snippets) + 1, fence, body, context_before(text, fence - 1)))
        i += 1
    return snippets


def context_before(text, fence_index):
    """The snippet-context comment ending on the line before the fence (blank lines aside)."""
    end = fence_index - 1
    while end >= 0 and not text[end].strip():
        end -= 1
    if end < 0 or not text[end].rstrip().endswith("-->"):
        return []
    start = end
    while start >= 0 and "<!--" not in text[start]:
        start -= 1
    if start < 0:
        return []
    block = "\n".join(text[start:end + 1])
    match = CONTEXT_RE.search(block)
    if not match:
        return []
    # Keep each line's own number for the compiler's messages.
    first = block[:match.start(1)].count("\n")
    return [(start + 1 + first + k, line) for k, line in enumerate(match.group(1).split("\n"))]


def translation_unit(snippet):
    """The C++ source of a snippet, with #line directives pointing into the markdown."""
    name = snippet.path.replace("\\", "\\\\").replace('"', '\\"')
    if any(MAIN_RE.search(line) for _, line in snippet.lines):
        out = [f'#line {snippet.lines[0][0]} "{name}"'] if snippet.lines else []
        return "\n".join(out + [line for _, line in snippet.lines]) + "\n"
    includes, body = [], []
    for number, line in snippet.context + snippet.lines:
        (includes if line.lstrip().startswith("#include") else body).append((number, line))
    out = list(PRELUDE)
    for number, line in includes:
        out += [f'#line {number} "{name}"', line]
    out += ["using namespace troupe;", f"void snippet_{snippet.index}() {{"]
    expected = None
    for number, line in body:
        if number != expected:
            out.append(f'#line {number} "{name}"')
        out.append(line)
        expected = number + 1
    out.append("}")
    return "\n".join(out) + "\n"


def compile_snippet(snippet, compiler, include_dirs, workdir):
    source = os.path.join(workdir, f"snippet_{os.path.basename(snippet.path)}_{snippet.index}.cpp")
    with open(source, "w", encoding="utf-8") as f:
        f.write(translation_unit(snippet))
    command = [compiler, "-std=c++20", "-fsyntax-only"] + [f"-I{d}" for d in include_dirs] + [source]
    result = subprocess.run(command, capture_output=True, text=True)
    return result.returncode == 0, result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="markdown files (default: docs/api.md README.md docs/cluster.md)")
    parser.add_argument("--build-dir", help="the build whose gen/ holds the generated headers "
                        "(default: the repository's $TROUPE_BUILD_DIR or build)")
    parser.add_argument("-I", dest="include_dirs", action="append",
                        help="include directory, replacing the default (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    # Files given are relative to the current directory; the defaults to the repository.
    files = args.files or [os.path.relpath(os.path.join(REPO, f)) for f in DEFAULT_FILES]
    build_dir = args.build_dir or os.path.join(REPO, os.environ.get("TROUPE_BUILD_DIR", "build"))
    include_dirs = [os.path.abspath(d) for d in args.include_dirs or [REPO, os.path.join(build_dir, "gen")]]
    compiler = os.environ.get("CXX", "c++")
    snippets = [s for path in files for s in extract(path)]
    if not snippets:
        sys.exit("check_doc_snippets: no ```cpp snippet in " + " ".join(files))

    failed = 0
    with tempfile.TemporaryDirectory(prefix="troupe-snippets.") as workdir, \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = pool.map(lambda s: (s, compile_snippet(s, compiler, include_dirs, workdir)), snippets)
        for snippet, (ok, errors) in results:
            where = f"{snippet.path}:{snippet.fence_line}"
            if ok:
                print(f"ok      {where} (snippet {snippet.index})")
                continue
            failed += 1
            print(f"FAILED  {where} (snippet {snippet.index}) does not compile:")
            print(errors.rstrip())
    print(f"check_doc_snippets: {len(snippets) - failed} of {len(snippets)} snippets compile")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
