#!/usr/bin/env python
"""Django's command-line utility for Tasuku."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasuku.settings")
    from tasuku.loading import loading

    # Django and the apps are loaded before the command runs, with the garbage collector
    # kept out of what they load (tasuku/loading.py: a start's CPU, a quarter less).
    with loading():
        import django
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured
        from django.core.management import execute_from_command_line

        try:
            settings.INSTALLED_APPS  # noqa: B018 - loads the settings
        except ImproperlyConfigured as exc:
            # A setting missing or malformed (tasuku/settings.py says which, and what to
            # do): the message is the whole answer, a traceback into the settings would
            # bury it.
            sys.exit(f"manage.py: {exc}")
        django.setup()
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
