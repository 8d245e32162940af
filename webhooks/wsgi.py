"""The intake's WSGI door: `POST /webhooks/github` answered in front of Django's request
handling (registered in webhooks/apps.py, put in front by tasuku/wsgi.py).

It does what Django's handler does for such a request — the request signals, through
which the database connections are checked and given back, and a logged 500 for an
error — and nothing else: no middleware (none of it concerns a signed delivery: no
session, no CSRF, no page to frame), no URL resolution. Its answers are the view's
(webhooks/views.py): both are `intake` (webhooks/intake.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core import signals
from django.http.request import split_domain_port, validate_host

from tasuku.doors import security_headers
from webhooks.intake import Answer, intake

logger = logging.getLogger("django.request")

_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    408: "Request Timeout",
    413: "Content Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _reader(environ: dict[str, Any]) -> Callable[[int], bytes]:
    """The body's reader, bounded as Django bounds it: by Content-Length (none: an empty
    body, as for the view; GitHub always says how long its body is). Reading past the
    body of a raw socket stream would wait for the client."""
    stream = environ["wsgi.input"]
    try:
        declared = max(0, int(environ.get("CONTENT_LENGTH") or 0))
    except ValueError:
        declared = 0
    return lambda size: stream.read(min(size, declared))


def _host(environ: dict[str, Any]) -> str:
    """The request's host as Django reads it (HttpRequest.get_host, before validation)."""
    if settings.USE_X_FORWARDED_HOST and "HTTP_X_FORWARDED_HOST" in environ:
        return environ["HTTP_X_FORWARDED_HOST"]
    if "HTTP_HOST" in environ:
        return environ["HTTP_HOST"]
    host, port = environ.get("SERVER_NAME", ""), str(environ.get("SERVER_PORT", ""))
    default = "443" if environ.get("wsgi.url_scheme") == "https" else "80"
    return host if port in ("", default) else f"{host}:{port}"


@lru_cache(maxsize=64)
def _host_allowed(host: str, allowed: tuple[str, ...], debug: bool) -> bool:
    """Whether ALLOWED_HOSTS admits `host`, as Django's request handling checks it."""
    domain, _ = split_domain_port(host)
    if debug and not allowed:
        allowed = (".localhost", "127.0.0.1", "[::1]")
    return bool(domain) and validate_host(domain, allowed)


def intake_door(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    signals.request_started.send(sender=intake_door, environ=environ)
    try:
        try:
            # As Django's middleware would (CommonMiddleware asks for the host): a Host
            # the site does not serve is refused before anything is read.
            if not _host_allowed(_host(environ), tuple(settings.ALLOWED_HOSTS), settings.DEBUG):
                answer = Answer(400, {"error": "invalid Host header"})
            else:
                answer = intake(environ, _reader(environ))
        except Exception:  # the intake's WSGI boundary: any error is a logged 500
            logger.exception("Internal Server Error: %s", environ.get("PATH_INFO", ""))
            signals.got_request_exception.send(sender=intake_door, request=None)
            answer = Answer(500, {"error": "internal error; the delivery may not be stored"})
        content = answer.content()
        start_response(
            f"{answer.status} {_REASONS.get(answer.status, '')}".rstrip(),
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(content))),
                *answer.headers,
                *security_headers(),
            ],
        )
        return [content]
    finally:
        signals.request_finished.send(sender=intake_door)
