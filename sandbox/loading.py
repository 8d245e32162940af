"""What a sandboxed program imports before it runs, kept out of the garbage collector's
walks: the engines' modules (the anthropic SDK alone makes some 1,500 pydantic classes)
are imported with the collector off, then frozen (`gc.freeze`: left out of every later
collection, and out of the children a fork server forks after) and the collector is on
again. Importing both model SDKs takes 1.28 to 1.54 CPU s collected as they come, 1.05
without. Used by the fork server before it forks (sandbox/runners/forkserver.py) and by
a program started on its own (sandbox/entry.py: the Docker runner's, Actions'). Tasuku's
own processes do the same (tasuku/loading.py); the sandbox imports nothing of Tasuku.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def loading() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
