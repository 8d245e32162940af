"""The intake has two doors (webhooks/intake.py): the WSGI door production serves, in
front of Django (tasuku/wsgi.py), and the Django view. Every test here that posts with
`client` runs through each."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import Client
from django.test.client import ClientHandler

from tasuku.doors import door_for
from tests.helpers import wsgi_serve


class DoorHandler(ClientHandler):
    """Django's test handler, except that a request a WSGI door answers goes through
    `tasuku.wsgi.application` as a server would send it."""

    def __call__(self, environ):
        if door_for(environ) is None:
            return super().__call__(environ)
        from django.core.handlers.wsgi import WSGIRequest

        status, headers, content = wsgi_serve(environ)
        response = HttpResponse(content, status=status)
        for name, value in headers:
            response[name] = value
        assert response["Content-Length"] == str(len(content))
        response.wsgi_request = WSGIRequest(environ)
        return response


class DoorClient(Client):
    def __init__(self, **defaults):
        super().__init__(**defaults)
        self.handler = DoorHandler(enforce_csrf_checks=False)


@pytest.fixture(params=["wsgi door", "django view"])
def client(request):
    return DoorClient() if request.param == "wsgi door" else Client()
