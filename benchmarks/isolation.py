"""What keeps a benchmark out of everyone else's way, and honest about what it measured.

Every script that serves or stores takes `--port` and `--database` (`arguments`):

- `--port 0` (the default) is a free port the system gives; a port that is taken is a
  server that does not start, never someone else's server measured.
- `--database` names where the rows go: `sqlite` (a file of its own, removed after), a
  `sqlite:///path` URL, `postgres` (the default where PostgreSQL is wanted: a database of
  a unique name on BENCH_POSTGRES_URL's server, default postgres://postgres@127.0.0.1:5432),
  a bare name on that server, or a `postgres://…/name` URL. A database the script
  created is dropped when it ends (`--keep-database` keeps it); one that was there
  before is used as it is and never dropped. DATABASE_URL is not read: a benchmark
  empties or fills its database, and the developer's own is never a default.

A server the script starts is served through `identity.wrap` and asked for the random
token the script passed it (`Served`): until the server that answers on the port is the
one started (its token, its process), nothing is measured.
"""

from __future__ import annotations

import argparse
import atexit
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
IDENTITY_PATH = "/__benchmark__/identity"
POSTGRES_SERVER = "postgres://postgres@127.0.0.1:5432"


def arguments(
    parser: argparse.ArgumentParser,
    *,
    database: str | None = "postgres",
    port: str | None = "where to serve",
) -> None:
    """--port (unless `port` is None: the script serves nothing), and (unless `database`
    is None) --database with that default and --keep-database."""
    if port is not None:
        parser.add_argument("--port", type=int, default=0, help=f"{port} (default 0: a free port)")
    if database is not None:
        parser.add_argument(
            "--database", default=database,
            help="sqlite, sqlite:///PATH, postgres (a new database of a unique name), a "
            f"name or a postgres:// URL (default: {database}); one that exists is used, "
            "never dropped",
        )  # fmt: skip
        parser.add_argument(
            "--keep-database", action="store_true", help="keep a database this run created"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_or_free(port: int) -> int:
    return port or free_port()


def unique_name(script: str) -> str:
    return f"tasuku_bench_{re.sub(r'[^a-z0-9]', '_', script.lower())}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Database:
    url: str  # DATABASE_URL for Tasuku's processes
    vendor: str  # "postgresql" or "sqlite"
    name: str  # the database's name, or the SQLite file
    created: bool  # by this run (and so dropped or removed at its end)

    @property
    def dsn(self) -> str:
        """For psycopg (a URL) or sqlite3 (a path)."""
        return self.name if self.vendor == "sqlite" else self.url


def _postgres_server() -> str:
    return os.environ.get("BENCH_POSTGRES_URL", POSTGRES_SERVER).rstrip("/")


@contextmanager
def own_database(spec: str, *, script: str, keep: bool = False) -> Iterator[Database]:
    """The database `spec` names (see the module's docstring), created if it is not there
    and then dropped at the end unless `keep`; one that was there is left as it was."""
    if os.environ.get("DATABASE_URL"):
        print("(DATABASE_URL is not read by the benchmarks: --database names their database)",
              file=sys.stderr)  # fmt: skip
    if spec == "sqlite" or spec.startswith("sqlite:"):
        yield from _sqlite(spec, script=script, keep=keep)
        return
    import psycopg

    if spec == "postgres":
        server, name = _postgres_server(), unique_name(script)
    elif spec.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(spec)
        server, name = f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")
    else:
        server, name = _postgres_server(), spec
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise SystemExit(f"--database {spec}: {name!r} is not a database name this script uses")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    created = not exists
    print(f"database: PostgreSQL {name} ({'created by this run' if created else 'already there'})")
    try:
        yield Database(url=f"{server}/{name}", vendor="postgresql", name=name, created=created)
    finally:
        if created and not keep:
            # Its own, under a name no other run has: FORCE only ends this run's leftovers.
            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        elif created:
            print(f"kept database {name}: --database {name} uses it again")


def _sqlite(spec: str, *, script: str, keep: bool) -> Iterator[Database]:
    if spec == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix=f"tasuku-bench-{script}-"))
        path = folder / "bench.sqlite3"
    else:
        path = Path(spec.removeprefix("sqlite:///")).resolve()  # sqlite:////abs or sqlite:///rel
        folder = None
    created = not path.exists()
    try:
        yield Database(url=f"sqlite:///{path}", vendor="sqlite", name=str(path), created=created)
    finally:
        if created and not keep:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            if folder is not None:
                folder.rmdir()


def migrate(env: dict[str, str]) -> None:
    subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip


# --- Servers that prove who they are ---------------------------------------------------------


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` is `ancestor` or one of its descendants (Linux /proc)."""
    for _ in range(64):
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return False
    return False


def identity(port: int, *, timeout: float = 2.0) -> dict | None:
    """What the server on `port` says it is (None: no answer, or not a benchmark's)."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", IDENTITY_PATH)
        response = conn.getresponse()
        body = response.read()
        conn.close()
    except (OSError, http.client.HTTPException):
        return None
    if response.status != 200:
        return {}
    try:
        return json.loads(body)
    except ValueError:
        return {}


class Served:
    """A WSGI app under gunicorn on 127.0.0.1:`port`, started with a random token in its
    environment: `__enter__` returns once the server answering there gives that token
    back from a process of its own (never another server that held the port), and
    `verify()` asks again (after a measurement: it was this server all along)."""

    def __init__(
        self, app: str, *, port: int, env: dict[str, str], gunicorn: list[str], log=None
    ) -> None:
        self.app, self.port, self.gunicorn, self.log = app, port_or_free(port), gunicorn, log
        self.token = secrets.token_hex(16)
        self.env = {**env, "BENCH_TOKEN": self.token}
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Served:
        command = [sys.executable, "-m", "gunicorn", self.app,
                   "--bind", f"127.0.0.1:{self.port}", *self.gunicorn]  # fmt: skip
        self.process = subprocess.Popen(  # noqa: S603
            command, cwd=ROOT, env=self.env, stdout=self.log, stderr=self.log,
            start_new_session=True,
        )  # fmt: skip
        someone_else = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                taken = " (another server answers there)" if someone_else else ""
                raise RuntimeError(f"{self.app} on port {self.port} exited{taken}")
            found = identity(self.port, timeout=1)
            if found is not None and self._ours(found):
                return self
            someone_else = someone_else or bool(found is not None)
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"{self.app} on port {self.port} did not answer as itself in 60 s")

    def _ours(self, found: dict) -> bool:
        assert self.process is not None
        return found.get("token") == self.token and descends_from(
            int(found.get("pid", 0)), self.process.pid
        )

    def verify(self) -> None:
        found = identity(self.port)
        if found is None or not self._ours(found):
            raise RuntimeError(f"the server on port {self.port} is no longer the one started")

    def __exit__(self, *exc: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def database_for_django(script: str, *, default: str = "postgres") -> Database:
    """For a script that sets Django up as it starts: its --database (and
    --keep-database) read from the command line now, DATABASE_URL pointed at it for this
    process and those it starts, and what the run created dropped when it exits. The
    script's own parser declares them too (`arguments`), for --help."""
    early = argparse.ArgumentParser(add_help=False)
    arguments(early, database=default, port=None)
    known, _ = early.parse_known_args()
    stack = ExitStack()
    db = stack.enter_context(own_database(known.database, script=script, keep=known.keep_database))
    atexit.register(stack.close)
    os.environ["DATABASE_URL"] = db.url
    return db
