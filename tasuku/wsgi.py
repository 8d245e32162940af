"""WSGI entry point: `gunicorn tasuku.wsgi`. Django's application, with the apps' doors
in front (tasuku/doors.py: the webhook intake)."""

import os

from django.core.wsgi import get_wsgi_application

from tasuku.doors import doors_wrap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")

application = doors_wrap(get_wsgi_application())
