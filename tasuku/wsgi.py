"""WSGI entry point: `gunicorn tasuku.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")

application = get_wsgi_application()
