"""Create the first admin account if there is none, and say how to log in."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from repos.github import missing_settings


class Command(BaseCommand):
    help = (
        "Create a superuser 'admin' when no superuser exists. The password is "
        "TASUKU_ADMIN_PASSWORD when set, otherwise generated and printed once."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=os.environ.get("TASUKU_ADMIN_USER", "admin"))

    def handle(self, *args: object, username: str, **options: object) -> None:
        if missing_settings():
            self.stdout.write(
                f"No GitHub App yet: create one at {settings.TASUKU_BASE_URL}/setup/github/ "
                "(or try the demo: README, 'Try it without GitHub')."
            )
        self._admin(username)

    def _admin(self, username: str) -> None:
        User = get_user_model()
        login_url = f"{settings.TASUKU_BASE_URL}/admin/"
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write(f"Log in at {login_url} with your admin account.")
            return
        password = os.environ.get("TASUKU_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if os.environ.get("TASUKU_ADMIN_PASSWORD"):
            self.stdout.write(
                f"Created admin account {username!r} with the password in "
                f"TASUKU_ADMIN_PASSWORD. Log in at {login_url}"
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created admin account {username!r} with password {password}\n"
                    f"Log in at {login_url} (change it with "
                    f"`python manage.py changepassword {username}`)."
                )
            )
