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
checked and closed there), answer errors itself. `view_door` makes one of a plain Django
view that needs nothing of the middleware (the health endpoints: reviews/apps.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger("django.request")

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


@lru_cache(maxsize=1)
def security_headers() -> tuple[tuple[str, str], ...]:
    """The headers Django's security and clickjacking middleware put on every answer
    (settings do not change while the process runs), so that a door's answers carry
    what a view's do."""
    headers = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        if not isinstance(policy, str):
            policy = ",".join(policy)
        headers.append(("Referrer-Policy", policy))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    headers.append(("X-Frame-Options", getattr(settings, "X_FRAME_OPTIONS", "DENY").upper()))
    return tuple(headers)


def view_door(view: Callable[[HttpRequest], HttpResponse]) -> WSGIApp:
    """A door that answers with `view`, without the middleware or URL resolution: for a
    view that reads nothing of the request — no session, no user, no Host — and whose
    answer is the same whoever asks. Such a view is also answered whatever Host the
    request names: ALLOWED_HOSTS guards the links a page builds from the Host, and it
    builds none, while a probe (a container's health check, a load balancer) asks by
    address."""

    def door(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        signals.request_started.send(sender=door, environ=environ)
        try:
            try:
                response = view(WSGIRequest(environ))
            except Exception:  # the door is a WSGI boundary: any error is a logged 500, as Django's
                logger.exception("Internal Server Error: %s", environ.get("PATH_INFO", ""))
                signals.got_request_exception.send(sender=door, request=None)
                response = JsonResponse({"status": "error"}, status=500)
            content = response.content
            start_response(
                f"{response.status_code} {response.reason_phrase}",
                [
                    *response.items(),
                    ("Content-Length", str(len(content))),
                    *security_headers(),
                ],
            )
            return [content]
        finally:
            signals.request_finished.send(sender=door)

    return door
