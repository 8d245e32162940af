"""Run one engine on the checkout in the current directory: a `ReviewJob` as JSON on
stdin (or in the file `--job-file` names), its `ReviewResult` as JSON on stdout. This is
what a runner executes inside its sandbox (`python -I -m sandbox.run_engine <engine>`);
it imports no Django."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from sandbox import progress
from sandbox.contract import ReviewJob
from sandbox.engines import ENGINES
from sandbox.entry import exit_with


def main(argv: list[str]) -> int:
    # The docker runner mounts the job as a read-only file: writing a container's stdin
    # through the Docker API is fragile, reading a mounted file is not.
    job_file = argv[3] if len(argv) == 4 and argv[2] == "--job-file" else None
    if len(argv) != (4 if job_file else 2) or argv[1] not in ENGINES:
        print(f"usage: run_engine {{{','.join(ENGINES)}}} [--job-file PATH]", file=sys.stderr)
        return 2
    # What the engine does goes to stderr as it happens (a runner with a log relays it).
    progress.sink = progress.to_stderr
    module, function = ENGINES[argv[1]].split(":")
    engine = getattr(importlib.import_module(module), function)
    raw = Path(job_file).read_bytes() if job_file else sys.stdin.read()
    job = ReviewJob.model_validate_json(raw)
    result = engine(job, Path.cwd())
    sys.stdout.write(result.model_dump_json())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    exit_with(main, sys.argv)
