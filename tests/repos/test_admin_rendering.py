"""The admin's pages say what they mean: help text shown as written, inline headings
readable, and records Tasuku writes shown as a view with the way to their page."""

from __future__ import annotations

import pytest

from repos.models import Reviewer
from tests.factories import RepositoryFactory, ReviewRunFactory

pytestmark = pytest.mark.django_db


def test_a_placeholder_in_help_text_is_shown_not_swallowed_as_a_tag(admin_client):
    repository = RepositoryFactory()
    page = admin_client.get(f"/admin/repos/repository/{repository.pk}/change/").content.decode()
    assert "`@&lt;app&gt; dismiss &lt;reason&gt;`" in page
    assert "<app>" not in page


def test_the_skills_inline_heading_reads_as_words(admin_client):
    reviewer = Reviewer.objects.get(slug="static")
    page = admin_client.get(f"/admin/repos/reviewer/{reviewer.pk}/change/").content.decode()
    assert "Skills (each loaded by the model when it needs it)" in page
    assert "it)s" not in page.lower()


def test_a_review_run_is_a_view_with_the_way_to_its_page(admin_client):
    run = ReviewRunFactory()
    response = admin_client.get(f"/admin/reviews/reviewrun/{run.pk}/change/")
    page = response.content.decode()
    assert response.status_code == 200
    assert f'href="/runs/{run.pk}/"' in page
    assert 'name="_save"' not in page and "/delete/" not in page
    assert "<label>Reviewer:</label>" in page
    assert "<label>Config:</label>" not in page  # the raw fields are the run page's to tell
    assert admin_client.post(f"/admin/reviews/reviewrun/{run.pk}/delete/").status_code == 403
