"""`manage.py reseal_keys`: seal every stored reviewer key and reviewers repository
token, every connector's credential, and the credentials of the GitHub App created on
the setup page, again under the current SECRET_KEY (run after rotating it, with the old
key in SECRET_KEY_FALLBACKS; then the fallback can go).
Idempotent; a key no current or fallback SECRET_KEY opens is named."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from repos.credentials import KeyUnreadable, key_reseal
from repos.models import AppRegistration, Connector, Reviewer

APP_FIELDS = ("private_key_sealed", "webhook_secret_sealed", "client_secret_sealed")


class Command(BaseCommand):
    help = "Seal every reviewer API key again under the current SECRET_KEY."

    def handle(self, *args: object, **options: object) -> None:
        resealed, unreadable = 0, []
        for reviewer in Reviewer.objects.exclude(api_key_sealed=""):
            try:
                sealed = key_reseal(reviewer.api_key_sealed)
            except KeyUnreadable:
                unreadable.append(reviewer.slug)
                continue
            Reviewer.objects.filter(pk=reviewer.pk).update(api_key_sealed=sealed)
            resealed += 1
        self.stdout.write(f"{resealed} reviewer key(s) sealed under the current SECRET_KEY.")
        resealed = 0
        for reviewer in Reviewer.objects.exclude(source_token_sealed=""):
            try:
                sealed = key_reseal(reviewer.source_token_sealed)
            except KeyUnreadable:
                unreadable.append(f"the reviewers repository token of {reviewer.slug}")
                continue
            Reviewer.objects.filter(pk=reviewer.pk).update(source_token_sealed=sealed)
            resealed += 1
        if resealed:
            self.stdout.write(
                f"{resealed} reviewers repository token(s) sealed under the current SECRET_KEY."
            )
        resealed = 0
        for connector in Connector.objects.exclude(credential_sealed=""):
            try:
                sealed = key_reseal(connector.credential_sealed)
            except KeyUnreadable:
                unreadable.append(f"the connector {connector.name}")
                continue
            Connector.objects.filter(pk=connector.pk).update(credential_sealed=sealed)
            resealed += 1
        if resealed:
            self.stdout.write(
                f"{resealed} connector credential(s) sealed under the current SECRET_KEY."
            )
        for app in AppRegistration.objects.all():
            try:
                fields = {f: key_reseal(getattr(app, f)) for f in APP_FIELDS if getattr(app, f)}
            except KeyUnreadable:
                unreadable.append(f"the GitHub App {app.slug} (create it again at /setup/github/)")
                continue
            AppRegistration.objects.filter(pk=app.pk).update(**fields)
            self.stdout.write(
                f"GitHub App {app.slug}: its credentials sealed under the current SECRET_KEY."
            )
        if unreadable:
            raise CommandError(
                "No SECRET_KEY (current or in SECRET_KEY_FALLBACKS) opens the key of: "
                + ", ".join(unreadable)
                + ". Enter those keys again in the admin."
            )
