"""How the programs a runner starts in its sandbox end (`python -I -m sandbox.run_engine`,
`python -I -m sandbox.run_reply`): the result on stdout and exit 0; else one JSON line
on stderr that the runner reads as the failure's reason — exit 4 for a failure the
program understood (its stage, code and whether a retry helps), exit 3 for anything
else (a bug: `internal-error`), exit 2 for a usage error (the program's own `main`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import NoReturn

from sandbox.errors import StageError


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
