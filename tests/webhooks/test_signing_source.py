"""The intake takes its webhook secret from the source the repos app registers."""

from __future__ import annotations

import pytest

from tests.helpers import payload, post_webhook
from webhooks import signing


def test_the_repos_app_registers_the_source_when_django_starts():
    from repos.github import missing_settings, webhook_secret

    assert signing._source == signing.Source(secret=webhook_secret, missing=missing_settings)


@pytest.mark.django_db
def test_with_no_source_a_delivery_is_refused_as_not_configured(client, monkeypatch):
    monkeypatch.setattr(signing, "_source", None)
    # A ping as GitHub sends it, signed with a secret Tasuku cannot know yet.
    response = post_webhook(client, "ping", payload("ping", "default"), secret="not-yet")
    assert response.status_code == 503
    assert response.json()["missing"] == signing.NOT_REGISTERED
