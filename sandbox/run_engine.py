"""Run one engine on the checkout in the current directory: a `ReviewJob` as JSON on
stdin, its `ReviewResult` as JSON on stdout. This is what a runner executes inside its
sandbox (`python -I -m sandbox.run_engine <engine>`); it imports no Django."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from sandbox.contract import ReviewJob
from sandbox.engines import ENGINES
from sandbox.errors import StageError


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ENGINES:
        print(f"usage: run_engine {{{','.join(ENGINES)}}}", file=sys.stderr)
        return 2
    module, function = ENGINES[argv[1]].split(":")
    engine = getattr(importlib.import_module(module), function)
    job = ReviewJob.model_validate_json(sys.stdin.read())
    result = engine(job, Path.cwd())
    sys.stdout.write(result.model_dump_json())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except StageError as exc:  # a failure the engine understood: its stage and whether to retry
        print(json.dumps({"error": str(exc), "stage": exc.stage, "permanent": exc.permanent}),
              file=sys.stderr)  # fmt: skip
        sys.exit(4)
    except Exception as exc:  # the runner reads this line as the failure's reason
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), file=sys.stderr)
        sys.exit(3)
