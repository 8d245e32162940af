"""Run the worker: django-q2's cluster (the reviews, the sweepers, the reaper), stopped
within TASUKU_STOP_SECONDS on SIGTERM or SIGINT to its main process or to all of its
processes (tasuku/cluster.py). `manage.py qcluster` still runs django-q2's own cluster,
which may hang when the whole process group is signalled."""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the worker (reviews and periodic work); SIGTERM or Ctrl-C stops it within TASUKU_STOP_SECONDS."

    def handle(self, *args: object, **options: object) -> None:
        from tasuku.cluster import Cluster

        settings.SECRET_KEY  # noqa: B018 - django-q2 signs its tasks: fail before starting
        code = Cluster().run()
        if code:
            sys.exit(code)
