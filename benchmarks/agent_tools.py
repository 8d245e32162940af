"""How fast the model engines' read-only tools answer on a large checkout.

    .venv/bin/python benchmarks/agent_tools.py [--files 20000] [--lines 60]

Writes a synthetic repository (Python, JavaScript and Markdown files in nested folders,
plus a few large and binary files the tools must skip) and times each tool the way a
model calls it: a regex search over everything, a narrowed search, a glob, a directory
listing, a paged read, a read by module name, and the symbol index (built on the first
question, then kept). Every tool result is bounded; these figures say how long the
model waits for one.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.agent.tools import Tools  # noqa: E402


def build(root: Path, files: int, lines: int, seed: int = 3) -> int:
    rng = random.Random(seed)
    written = 0
    for index in range(files):
        folder = root / f"pkg{index % 50}" / f"mod{index % 37}"
        folder.mkdir(parents=True, exist_ok=True)
        kind = index % 3
        if kind == 0:
            body = "".join(
                f"def f{index}_{n}(x):\n    return x * {rng.randint(0, 999)}  # note {n}\n"
                for n in range(lines // 2)
            )
            name = f"m{index}.py"
        elif kind == 1:
            body = "".join(
                f"export const v{index}_{n} = {rng.randint(0, 999)};\n" for n in range(lines)
            )
            name = f"m{index}.js"
        else:
            body = "".join(f"Line {n} of the notes on item {index}.\n" for n in range(lines))
            name = f"m{index}.md"
        (folder / name).write_text(body)
        written += len(body)
    (root / "big.log").write_text("x" * 2_000_000)  # past the search size limit
    (root / "image.bin").write_bytes(bytes(range(256)) * 1000)
    (root / "needle.py").write_text("SECRET_TOKEN_NAME = 'needle'\n")
    return written


def timed(label: str, fn) -> None:
    started = time.perf_counter()
    out = fn()
    elapsed = (time.perf_counter() - started) * 1000
    print(f"  {label:<44} {elapsed:8.1f} ms  ({len(out.splitlines())} lines back)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--lines", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        size = build(root, args.files, args.lines)
        print(f"synthetic checkout: {args.files} files, {size / 1e6:.1f} MB of text")
        tools = Tools(root)
        timed(
            "search_code rare pattern, all files",
            lambda: tools.call("search_code", {"pattern": "SECRET_TOKEN"}),
        )
        timed(
            "search_code common pattern (stops at cap)",
            lambda: tools.call("search_code", {"pattern": r"return x \*"}),
        )
        timed(
            "search_code rare pattern, *.py only",
            lambda: tools.call("search_code", {"pattern": "SECRET_TOKEN", "path_glob": "*.py"}),
        )
        timed("find_files **/m1*.js", lambda: tools.call("find_files", {"pattern": "**/m1*.js"}))
        timed(
            "list_directory pkg7/mod7", lambda: tools.call("list_directory", {"path": "pkg7/mod7"})
        )
        timed("read_file first page", lambda: tools.call("read_file", {"path": "pkg0/mod0/m0.py"}))
        timed(
            "read_file by module name (resolved)",
            lambda: tools.call("read_file", {"path": "pkg0.mod0.m0"}),
        )
        if tools.index is not None:
            timed(
                "find_symbol, building the index (first call)",
                lambda: tools.call("find_symbol", {"name": "f0_1"}),
            )
            timed("find_symbol, index built", lambda: tools.call("find_symbol", {"name": "f3_1"}))
            timed(
                "symbol_references (files with the name)",
                lambda: tools.call("symbol_references", {"name": "f0_1"}),
            )


if __name__ == "__main__":
    main()
