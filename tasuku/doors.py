"""WSGI doors: a hot path answered before Django's request handling.

An app registers a plain WSGI callable for one method and path when Django starts
(`door_register`, from its `AppConfig.ready`); `doors_wrap` puts the registered doors in
front of Django's WSGI application (tasuku/wsgi.py). A request for a door skips the
middleware stack and URL resolution, which on the webhook intake cost more than verifying
and storing the delivery (benchmarks/webhook_intake.py); every other request, and any
other method on a door's path, is Django's as before. tasuku imports none of the apps:
they register themselves.

A door is a complete WSGI application and must do what Django's handler would have done
for it: send `request_started` and `request_finished` (the database connections are
checked and closed there), answer errors itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_doors: dict[tuple[str, str], WSGIApp] = {}


def door_register(method: str, path: str, app: WSGIApp) -> None:
    """Answer `method path` (PATH_INFO, below any SCRIPT_NAME) with `app`."""
    _doors[(method.upper(), path)] = app


def door_for(environ: dict[str, Any]) -> WSGIApp | None:
    return _doors.get((environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")))


def doors_wrap(django_app: WSGIApp) -> WSGIApp:
    """`django_app` with the registered doors in front of it."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        door = _doors.get((environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")))
        if door is not None:
            return door(environ, start_response)
        return django_app(environ, start_response)

    return application
