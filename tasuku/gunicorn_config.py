"""gunicorn's hooks for Tasuku's web server: `gunicorn tasuku.wsgi --config
python:tasuku.gunicorn_config …` (`manage.py serve`, the systemd unit and the image do).

gunicorn stops gracefully on SIGTERM — no new connections, the requests in flight
finished within `--graceful-timeout` — but treats SIGINT as a quick shutdown that drops
them, in the master and in each worker. Ctrl-C sends SIGINT to the whole foreground group
(`make run`), and some process managers stop with it: here SIGINT is SIGTERM, in both.
SIGQUIT stays the quick shutdown.

Each worker loads the application (Django and the apps) with the garbage collector kept
out of what it loads (tasuku/loading.py), from its fork to its first request."""

from __future__ import annotations

import signal

from tasuku import loading


def on_starting(server) -> None:
    # The arbiter looks its handlers up by name on itself, for each signal it dequeues.
    server.handle_int = server.handle_term


def post_fork(server, worker) -> None:
    # In the worker, before it loads the application.
    loading.begin()


def post_worker_init(worker) -> None:
    # After the worker installed its own handlers (init_signals) and loaded the
    # application, before it serves.
    signal.signal(signal.SIGINT, worker.handle_exit)
    loading.end()
