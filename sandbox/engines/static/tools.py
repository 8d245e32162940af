"""Where the static engine's command-line tools are: beside the running Python (they
are installed into the same environment), else on PATH."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"the static engine needs `{name}`, which is not installed")
    return found
