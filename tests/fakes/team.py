"""A team's own system, as a connector calls it: a small HTTP server on 127.0.0.1 that
records every request (its headers too: the test checks the credential arrived) and
answers as a tracker might, or slowly, or too much, or by redirecting.

- `GET /tickets/{key}`: the ticket as JSON; `POST /search`: the JSON body it received,
  echoed back;
- `GET /slow?seconds=N`: answers after N seconds; `GET /drip?seconds=N`: sends its body
  a byte at a time, one a second, for N seconds;
- `GET /huge?bytes=N`: N bytes of text;
- `GET /redirect?to=URL`: 302 to URL;
- `GET /echo`: the request's headers, as JSON (a system that echoes its request);
- `GET /fail`: 500; `GET /binary`: application/octet-stream.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

TICKET = {
    "summary": "Refunds must refuse negative amounts",
    "status": "In progress",
    "description": "refund(-5) pays the customer. The fix must check the sign.",
}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a caller that hung up on a slow or huge answer: what the tests want


class TeamSystem:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = _Server(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> TeamSystem:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()


def _handler(system: TeamSystem):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A kept-alive connection answered in several writes meets Nagle's algorithm and the
        # client's delayed ACK: 40 ms a call that a real server does not take.
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:  # fmt: skip
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _record(self) -> tuple[str, dict[str, list[str]], bytes]:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            with system.lock:
                system.seen.append(
                    Seen(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )  # fmt: skip
                )
            return parts.path, parse_qs(parts.query), body

        def do_POST(self) -> None:
            path, _, body = self._record()
            if path == "/search":
                self._send(200, json.dumps({"received": json.loads(body or b"null")}).encode())
            else:
                self._send(404, b'{"error": "no such endpoint"}')

        def do_GET(self) -> None:
            path, query, _ = self._record()
            number = float((query.get("seconds") or ["0"])[0])
            if path.startswith("/tickets/"):
                key = unquote(path.removeprefix("/tickets/"))
                self._send(200, json.dumps({"key": key, **TICKET}).encode())
            elif path == "/slow":
                system.stopping.wait(number)
                self._send(200, b'{"late": true}')
            elif path == "/drip":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(int(number)))
                self.end_headers()
                for _ in range(int(number)):
                    if system.stopping.wait(1):
                        return
                    try:
                        self.wfile.write(b".")
                        self.wfile.flush()
                    except OSError:
                        return
            elif path == "/huge":
                size = int((query.get("bytes") or ["2000000"])[0])
                self._send(200, b"x" * size, "text/plain")
            elif path == "/redirect":
                self._send(302, b"", headers={"Location": query["to"][0]})
            elif path == "/echo":
                self._send(200, json.dumps(dict(self.headers.items())).encode())
            elif path == "/fail":
                self._send(500, b'{"error": "the tracker is down"}')
            elif path == "/binary":
                self._send(200, b"\x00\x01\x02", "application/octet-stream")
            else:
                self._send(404, b'{"error": "no such endpoint"}')

    return Handler


def wait_for(predicate, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()
