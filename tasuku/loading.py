"""A process's start: what it loads is kept out of the garbage collector's walks.

A Tasuku process imports Django, its apps and the libraries they use: some 200,000
objects that live as long as the process. Python's cyclic collector, at its default
thresholds, walks them again and again while they are being created, and again at every
full collection afterwards, and frees nothing: about a quarter of `manage.py check`'s CPU
(1.07 → 0.77 s measured) and a fifth of a fresh `migrate`'s (4.3 → 3.5 s). So a process
loads with the collector off, then freezes what it loaded (`gc.freeze`: those objects are
left out of every later collection, and a child forked afterwards — django-q2's worker
processes — shares their pages instead of copying them) and collects as usual from then
on. Garbage the start itself leaves is frozen with the rest: it is a few kilobytes, once.

`manage.py` loads inside `loading()`; gunicorn's workers between `begin()` (`post_fork`)
and `end()` (`post_worker_init`, once the application is loaded; tasuku/gunicorn_config.py).
The sandbox's programs and its fork server do the same for the engines' imports, with
a twin of their own (sandbox/loading.py: the sandbox imports nothing of Tasuku).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def begin() -> None:
    """The collector off while the process loads what it keeps."""
    gc.disable()


def end() -> None:
    """What is loaded is frozen out of later collections; collect as usual from now on."""
    gc.freeze()
    gc.enable()


@contextlib.contextmanager
def loading() -> Iterator[None]:
    begin()
    try:
        yield
    finally:
        end()
