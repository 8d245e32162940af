"""The one shape of the programs a runner starts in its sandbox (`python -I -m
sandbox.run_engine`, `python -I -m sandbox.run_reply`, each a `Program`): an engine's name
on the command line, a job as JSON on stdin (or in a file), the job run on the checkout in
the current directory.

How they end: the result on stdout and exit 0; else one JSON line on stderr that the
runner reads as the failure's reason — exit 4 for a failure the program understood (its
stage, code and whether a retry helps), exit 3 for anything else (a bug:
`internal-error`), exit 2 for a usage error (`Program.main`)."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from sandbox.errors import StageError
from sandbox.loading import loading

# What a program runs: the job, and the checkout it runs on.
Handler = Callable[[Any, Path], BaseModel]


def resolved(entry: str) -> Any:
    """The object a "module:name" entry names, its module imported."""
    module, name = entry.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Program:
    """A sandboxed program: `name`, the engines it takes (`choices`), the job it reads,
    `start` (an engine's name → what runs the job, with whatever it imports), and whether
    the job may come in a file (`--job-file PATH`) and which failures it reports with
    their stage and code (`understood`; one that reports none of its own passes `()`)."""

    name: str
    choices: Sequence[str]
    job: type[BaseModel]
    start: Callable[[str], Handler]
    job_file: bool = False
    understood: tuple[type[StageError], ...] = (StageError,)

    def main(self, argv: list[str]) -> int:
        job_file = argv[3] if self.job_file and len(argv) == 4 and argv[2] == "--job-file" else None
        if len(argv) != (4 if job_file else 2) or argv[1] not in self.choices:
            usage = f"usage: {self.name} {{{','.join(self.choices)}}}"
            print(usage + (" [--job-file PATH]" if self.job_file else ""), file=sys.stderr)
            return 2
        with loading():  # the engine's imports (a model SDK), out of the collector's walks
            handler = self.start(argv[1])
        raw = Path(job_file).read_bytes() if job_file else sys.stdin.read()
        result = handler(self.job.model_validate_json(raw), Path.cwd())
        sys.stdout.write(result.model_dump_json())
        sys.stdout.flush()
        return 0

    def exit(self, argv: list[str]) -> NoReturn:
        exit_with(self.main, argv, understood=self.understood)


def exit_with(
    main: Callable[[list[str]], int],
    argv: list[str],
    *,
    understood: tuple[type[StageError], ...] = (StageError,),
) -> NoReturn:
    """Run `main(argv)` and exit as above. `understood`: the failures reported with
    their stage and code (a program that reports none of its own passes `()`)."""
    try:
        sys.exit(main(argv))
    except understood as exc:
        print(
            json.dumps(
                {
                    "error": str(exc),
                    "stage": exc.stage,
                    "permanent": exc.permanent,
                    "code": exc.code,
                }
            ),
            file=sys.stderr,
        )
        sys.exit(4)
    except Exception as exc:  # the runner reads this line as the failure's reason
        print(
            json.dumps({"error": f"{type(exc).__name__}: {exc}", "code": "internal-error"}),
            file=sys.stderr,
        )
        sys.exit(3)
