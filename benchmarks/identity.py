"""The WSGI apps a benchmark serves, each able to say which server it is.

`GET /__benchmark__/identity` answers the token the benchmark passed in BENCH_TOKEN and
the process's id (benchmarks/isolation.py `Served` checks both); every other request
goes to the app untouched. The floor and Tasuku are wrapped alike, so the one branch
this adds costs both the same.

    gunicorn benchmarks.identity:tasuku
    gunicorn benchmarks.floor_app:application      (wrapped in floor_app.py)
"""

from __future__ import annotations

import json
import os

IDENTITY_PATH = "/__benchmark__/identity"


def wrap(app):
    token = os.environ.get("BENCH_TOKEN", "")

    def application(environ, start_response):
        if environ.get("PATH_INFO") == IDENTITY_PATH:
            body = json.dumps({"token": token, "pid": os.getpid()}).encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        return app(environ, start_response)

    return application


def __getattr__(name: str):
    # Tasuku is loaded when gunicorn asks for it, not when the floor imports `wrap`.
    if name == "tasuku":
        from tasuku.wsgi import application

        return wrap(application)
    raise AttributeError(name)
