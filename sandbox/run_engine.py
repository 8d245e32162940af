"""Run one engine on the checkout in the current directory: a `ReviewJob` as JSON on
stdin (or in the file `--job-file` names), its `ReviewResult` as JSON on stdout. This is
what a runner executes inside its sandbox (`python -I -m sandbox.run_engine <engine>`);
it imports no Django."""

from __future__ import annotations

import sys

from sandbox import progress
from sandbox.contract import ReviewJob
from sandbox.engines import ENGINES
from sandbox.entry import Handler, Program, resolved


def engine_start(engine: str) -> Handler:
    # What the engine does goes to stderr as it happens (a runner with a log relays it).
    progress.sink = progress.to_stderr
    return resolved(ENGINES[engine])


# The docker runner mounts the job as a read-only file: writing a container's stdin
# through the Docker API is fragile, reading a mounted file is not.
PROGRAM = Program("run_engine", tuple(ENGINES), ReviewJob, engine_start, job_file=True)
main = PROGRAM.main


if __name__ == "__main__":
    PROGRAM.exit(sys.argv)
