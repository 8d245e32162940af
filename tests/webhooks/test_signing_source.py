"""The intake takes its webhook secret from the source the repos app registers."""

from __future__ import annotations

import pytest

from webhooks import signing


def test_the_repos_app_registers_the_source_when_django_starts():
    from repos.github import missing_settings, webhook_secret

    assert signing._source == signing.Source(secret=webhook_secret, missing=missing_settings)


@pytest.mark.django_db
def test_with_no_source_a_delivery_is_refused_as_not_configured(client, monkeypatch):
    monkeypatch.setattr(signing, "_source", None)
    response = client.post(
        "/webhooks/github", data=b"{}", content_type="application/json",
        HTTP_X_GITHUB_EVENT="ping", HTTP_X_GITHUB_DELIVERY="d-1",
    )  # fmt: skip
    assert response.status_code == 503
    assert response.json()["missing"] == signing.NOT_REGISTERED
