"""A connector's HTTP call, guarded: http(s) only, to the allowed hosts only (the URL
template's host unless the operator lists others), redirects followed only to those
hosts (never from https down to http, never for a POST), the whole call within the
connector's timeout (redirects and the answer's last byte included), at most its
response size read, text answers only. No proxy variables are read: the call goes
where the operator said, from the worker or the web process.

The credential is sent in the header the operator named, to the allowed hosts only; it
is never logged, never in an error message, and taken out of the answer should the
system echo it back.
"""

from __future__ import annotations

import codecs
import http.client
import re
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from repos.connectors.errors import Failed

MAX_REDIRECTS = 3
USER_AGENT = "Tasuku-connector (a code reviewer asking the team's system)"
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/problem+json")
REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)  # the credential's among them
    secret: str = ""  # the credential's value: never let back out
    hosts: tuple[str, ...] = ()  # allowed; empty: the URL's own host only
    timeout: float = 10
    max_bytes: int = 65_536


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    read: int  # bytes read from the system


def host_allowed(host: str, port: int | None, allowed: tuple[str, ...] | list[str]) -> bool:
    """Whether `host[:port]` is one of `allowed` (`*.example.com`: a subdomain of it)."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        name, _, wanted_port = entry.lower().partition(":")
        if wanted_port and port is not None and int(wanted_port) != port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name:
            return True
    return False


def _charset(content_type: str) -> str:
    match = re.search(r"charset=\"?([\w.-]+)", content_type)
    if match:
        try:
            return codecs.lookup(match.group(1)).name
        except LookupError:
            pass
    return "utf-8"


def scrubbed(text: str, secret: str) -> str:
    """`text` without the credential (nor its token alone, after a scheme such as
    `Bearer `): a system that echoes its request back must not hand it to the model."""
    for value in {secret, secret.partition(" ")[2]}:
        if len(value) >= 6:
            text = text.replace(value, "[credential removed]")
    return text


def call(request: Request) -> Answer:
    """Make the call; `Failed` says what went wrong."""
    deadline = time.monotonic() + request.timeout
    first = urlsplit(request.url)
    origin = (first.hostname, first.port or (443 if first.scheme == "https" else 80))
    url, method, body = request.url, request.method, request.body
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise Failed("Only http and https are called.")
        if first.scheme == "https" and parts.scheme != "https":
            raise Failed("The system redirected from https to http: not followed.")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        reachable = (
            host_allowed(parts.hostname, port, request.hosts)
            if request.hosts and parts.hostname
            else (parts.hostname, port) == origin
        )
        if not parts.hostname or not reachable:
            raise Failed(
                f"The system redirected to {parts.hostname or 'nowhere'}, which this connector "
                "may not reach: not followed."
            )
        status, headers, data = _exchange(parts, method, body, request, deadline)
        if status in REDIRECTS and headers.get("location"):
            if method != "GET":
                raise Failed(f"The system answered HTTP {status} (a redirect) to a POST.")
            url = urljoin(url, headers["location"])
            continue
        content_type = headers.get("content-type", "").lower()
        text = scrubbed(data.decode(_charset(content_type), errors="replace"), request.secret)
        if status >= 400:
            raise Failed(f"The system answered HTTP {status}: {text[:1000]}", read=len(data))
        if content_type and not content_type.startswith(TEXT_TYPES) and "+json" not in content_type:
            raise Failed(
                f"The system answered {content_type.split(';')[0]}, not text.", read=len(data)
            )
        return Answer(status, text, len(data))
    raise Failed(f"More than {MAX_REDIRECTS} redirects.")


def _exchange(
    parts, method: str, body: bytes | None, request: Request, deadline: float
) -> tuple[int, dict[str, str], bytes]:
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    left = deadline - time.monotonic()
    if left <= 0:
        raise Failed(f"No answer within {request.timeout:g} s.")
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=left, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=left)
    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "application/json, text/plain;q=0.9, */*;q=0.1",
        "Accept-Encoding": "identity",
        **request.headers,
    }
    if body is not None:
        headers["Content-Type"] = "application/json"
    read = 0
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed(f"The answer did not end within {request.timeout:g} s.", read=read)
            # Each wait is at most what is left: a system that sends a byte at a time
            # cannot hold the call past its timeout.
            if connection.sock is not None:
                connection.sock.settimeout(left)
            chunk = response.read1(65_536)
            if not chunk:
                break
            read += len(chunk)
            if read > request.max_bytes:
                raise Failed(
                    f"The answer is larger than {request.max_bytes} bytes: cut off.", read=read
                )
            chunks.append(chunk)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, b"".join(chunks)
    except TimeoutError as exc:
        said = "The answer did not end" if read else "No answer"
        raise Failed(f"{said} within {request.timeout:g} s.", read=read) from exc
    except (OSError, http.client.HTTPException) as exc:
        # The exception's text, never the request's headers.
        raise Failed(f"Could not reach the system: {type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
