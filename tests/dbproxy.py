"""A TCP proxy in front of a database server, that a test (or a benchmark) can cut and
restore: a database outage without stopping the server others share.

    proxy = DatabaseProxy("127.0.0.1", 5432).start()   # listens on 127.0.0.1:proxy.port
    proxy.cut()       # new connections refused, open ones dropped — as a stopped server
    proxy.restore()   # listening again on the same port
    proxy.stop()

Cut, it closes its listening socket (a client's connect is refused, as by a server that is
not running) and shuts both ends of every connection it forwards (a client's next read
finds the connection closed, as when the server went away).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class DatabaseProxy:
    def __init__(self, host: str, port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self.listen_host = listen_host
        self.port = 0
        self.accepted = 0  # connections forwarded so far
        self.refused_while_cut = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._stopped = threading.Event()
        self._cut = threading.Event()

    def start(self) -> DatabaseProxy:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.listen_host, self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True,
                         name="db-proxy-accept").start()  # fmt: skip

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: cut or stopped
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._cut.is_set():
                    client.close()
                    upstream.close()
                    continue
                self._pairs.append((client, upstream))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True,
                             name="db-proxy-pump").start()  # fmt: skip

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, upstream)
        selector.register(upstream, selectors.EVENT_READ, client)
        try:
            while True:
                for key, _ in selector.select():
                    source, sink = key.fileobj, key.data
                    data = source.recv(65536)
                    if not data:
                        return
                    sink.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            self._drop(client, upstream)

    def _drop(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            if (client, upstream) in self._pairs:
                self._pairs.remove((client, upstream))
        for end in (client, upstream):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                end.close()

    def cut(self) -> None:
        """Refuse new connections and drop the open ones."""
        with self._lock:
            self._cut.set()
            listener, self._listener = self._listener, None
            pairs = list(self._pairs)
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            listener.close()
        for client, upstream in pairs:
            self._drop(client, upstream)

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        with self._lock:
            self._cut.clear()
        self._listen()

    @property
    def is_cut(self) -> bool:
        return self._cut.is_set()

    def stop(self) -> None:
        self.cut()
