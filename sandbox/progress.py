"""What an engine is doing, as it does it: one line per model call, tool call and
explorer, written to the engine's stderr while it runs. A runner that shows a log (the
GitHub Actions runner's job log) relays them as they come; the others keep stderr for
the failure line alone, and the transcript on the run page is the record.

An engine process turns it on (`sink = to_stderr`, sandbox/run_engine.py); in any other
process `emit` costs nothing. Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

PREFIX = "tasuku:progress "
SUMMARY_CHARS = 120

sink: Callable[[dict[str, Any]], None] | None = None


def to_stderr(event: dict[str, Any]) -> None:
    sys.stderr.write(PREFIX + json.dumps(event, ensure_ascii=False) + "\n")
    sys.stderr.flush()


def emit(kind: str, **fields: Any) -> None:
    if sink is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed stderr stops no review
            sink({"kind": kind, **fields})


def arguments_summary(arguments: Any) -> str:
    """A tool call's input in one short line: its path or pattern when it has one."""
    if isinstance(arguments, dict):
        for key in ("path", "pattern", "name", "symbol", "url", "query", "question"):
            value = arguments.get(key)
            if isinstance(value, str) and value:
                text = value
                if key == "path" and arguments.get("start_line"):
                    text += f":{arguments.get('start_line')}-{arguments.get('end_line') or ''}"
                return _clip(text)
        if "questions" in arguments and isinstance(arguments["questions"], list):
            return _clip(f"{len(arguments['questions'])} questions")
    try:
        return _clip(json.dumps(arguments, ensure_ascii=False))
    except (TypeError, ValueError):
        return _clip(repr(arguments))


def parse(line: str) -> dict[str, Any] | None:
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX) :])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def described(event: dict[str, Any]) -> str:
    """One line for a person reading a log."""
    kind = event.get("kind")
    seconds = event.get("seconds")
    took = f" · {seconds:.1f} s" if isinstance(seconds, int | float) else ""
    if kind == "model":
        return (
            f"model call {event.get('step', '?')}: {event.get('input', 0):,} tokens in, "
            f"{event.get('output', 0):,} out{took}"
        )
    if kind == "tool":
        failed = " (refused)" if event.get("error") else ""
        return f"tool {event.get('name', '?')} {event.get('args', '')}{failed}{took}".rstrip()
    if kind == "explorer":
        cost = event.get("cost")
        spent = f" · ${cost:.4f}" if isinstance(cost, int | float) else ""
        return (
            f"explorer done: {event.get('question', '')} ({event.get('steps', 0)} model calls, "
            f"{event.get('read', 0)} files read{spent})"
        )
    return f"{kind}: {json.dumps({k: v for k, v in event.items() if k != 'kind'})}"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
