"""Log lines that say what they are about: the run, its attempt, the delivery, the
installation and repository in hand when a line is written, as fields of the record.

The code that takes a piece of work sets them for as long as it works on it
(`log_context`: a delivery's processing in webhooks/services.py, a run's pipeline in
reviews/pipeline/flow.py); `ContextFilter` puts them on every record written meanwhile (in the
same thread), after any the call gave itself (`extra=`). The plain format ends a line
with them (`[run=12 attempt=2 installation=41 repository=acme/shop]`);
`TASUKU_LOG_FORMAT=json` writes one JSON object a line instead (python-json-logger),
every field a key, for a log store to query.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter as LibraryJsonFormatter

# The fields a line can carry, in the order the plain format shows them.
FIELDS = ("run", "attempt", "delivery", "event", "installation", "repository")
# Other fields callers give with `extra=` that the JSON format keeps (the plain format
# has them in the message already, but for a failure's error id: `error=…`).
EXTRA = ("status", "reason", "error_id")

_context: ContextVar[dict[str, Any]] = ContextVar("tasuku_log_context", default={})  # noqa: B039


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Put `fields` (those of FIELDS; None and "" are left out) on every line written in
    this block, on top of the enclosing block's."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"not a log field: {', '.join(sorted(unknown))}")
    token = _context.set(
        {**_context.get(), **{k: v for k, v in fields.items() if v is not None and v != ""}}
    )
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        shown = []
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = context.get(name)
                setattr(record, name, value)
            if value is not None and value != "":
                shown.append(f"{name}={value}")
        if getattr(record, "error_id", None):  # a failure's namespaced id (tasuku/errors.py)
            shown.append(f"error={record.error_id}")
        record.context = f" [{' '.join(shown)}]" if shown else ""
        return True


class PlainFormatter(logging.Formatter):
    """`time LEVEL logger message [fields]`; the fields are found even when the handler
    has no ContextFilter."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s%(context)s")

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "context"):
            ContextFilter().filter(record)
        return super().format(record)


class JsonFormatter(LibraryJsonFormatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, the fields
    that are set, and the exception's traceback when there is one. Only those: a record's
    other attributes (a Django request, say) stay out of the log store."""

    KEPT = ("time", "level", "logger", "message", *FIELDS, *EXTRA, "exception")

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={
                "asctime": "time", "levelname": "level", "name": "logger",
                "exc_info": "exception",
            },
            json_default=str,
        )  # fmt: skip

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "context"):
            ContextFilter().filter(record)
        return super().format(record)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {
            key: log_data[key]
            for key in self.KEPT
            if key in log_data and log_data[key] is not None and log_data[key] != ""
        }
