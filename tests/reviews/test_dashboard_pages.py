"""The dashboard's pages as an operator reads them: the overview, repositories, a pull
request, a run, workflow diagnostics and search; and who may act on them."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from github import GithubException

from repos.github.errors import classify
from reviews.memory.outcomes import figures
from reviews.models import (
    FindingOutcome,
    ReviewRun,
    RunStatus,
    WorkerHeartbeat,
)
from reviews.queue import runs
from sandbox.agent.errors import provider_error
from sandbox.errors import CloneError, SandboxError
from sandbox.git import clone_error as _clone_error
from tests.factories import (
    FindingFactory,
    InstallationFactory,
    PullRequestFactory,
    RepositoryFactory,
    ReviewerFactory,
    ReviewFactory,
    ReviewRunFactory,
    WebhookDeliveryFactory,
)
from tests.helpers import queued_tasks

pytestmark = pytest.mark.django_db


def _age(obj, **delta) -> None:
    """Move a row's created_at into the past (auto_now_add cannot be set on create)."""
    type(obj).objects.filter(pk=obj.pk).update(created_at=timezone.now() - timedelta(**delta))


def _failed(error: Exception, *, stage: str = "", hours_ago: float = 1, **kwargs) -> ReviewRun:
    """A run that failed with `error`, recorded as the worker records a failure."""
    run = ReviewRunFactory(**kwargs)
    held = runs.run_claim(run.pk)
    runs.run_attempt_failed(held, error, stage=stage or error.stage, final=True)
    when = timezone.now() - timedelta(hours=hours_ago)
    ReviewRun.objects.filter(pk=run.pk).update(started_at=when, finished_at=when)
    run.refresh_from_db()
    return run


DENIED = "fatal: Authentication failed for 'https://github.com/acme/shop/'"
GONE = "fatal: remote error: upload-pack: not our ref 1234567"


class _ApiStatus(Exception):
    """What the model SDKs raise for an HTTP answer."""

    def __init__(self, status: int) -> None:
        super().__init__("invalid x-api-key")
        self.status_code = status


class TestOverview:
    def test_it_counts_runs_of_the_last_day_and_week_by_outcome(self, staff_client):
        ReviewRunFactory(status=RunStatus.COMPLETED)
        _age(ReviewRunFactory(status=RunStatus.COMPLETED), days=3)
        _age(ReviewRunFactory(status=RunStatus.FAILED), days=3)
        _age(ReviewRunFactory(status=RunStatus.COMPLETED), days=10)  # outside both windows

        rows = {r["status"]: r for r in staff_client.get("/").context["run_counts"]}

        assert (rows["completed"]["day"], rows["completed"]["week"]) == (1, 2)
        assert (rows["failed"]["day"], rows["failed"]["week"]) == (0, 1)

    def test_it_groups_failures_by_stage_with_the_most_recent_error_and_its_cause(
        self, staff_client
    ):
        _failed(_clone_error("clone", "remote: Repository not found."), hours_ago=5)
        latest = _failed(_clone_error("fetch the head", DENIED), hours_ago=1)
        _failed(provider_error("Anthropic", "claude-x", _ApiStatus(401)))

        page = staff_client.get("/")
        clone = next(r for r in page.context["failures"] if r.stage == "clone")

        assert clone.count == 2 and clone.last == latest
        assert clone.advice.key == "clone-access"
        content = page.content.decode()
        assert f"/runs/{latest.pk}/" in content
        assert "The App may not read this repository." in content
        # The run's page says what to do, whose fix it is and the error's namespaced id.
        run_page = staff_client.get(f"/runs/{latest.pk}/").content.decode()
        assert (
            "(yours to fix: configuration, a key, a permission or the repository; "
            "<code>clone:yours:access</code>)" in run_page
        )

    def test_it_shows_the_queue_depth_and_the_oldest_queued_run(self, staff_client):
        oldest = ReviewRunFactory(status=RunStatus.QUEUED)
        _age(oldest, minutes=42)
        ReviewRunFactory(status=RunStatus.QUEUED)
        ReviewRunFactory(status=RunStatus.RUNNING)

        page = staff_client.get("/")

        queue = page.context["queue"]
        assert (queue.queued, queue.running, queue.oldest) == (2, 1, oldest)
        assert "42\xa0minutes" in page.content.decode()

    def test_it_shows_which_workers_heartbeat_and_which_fell_silent(self, staff_client):
        now = timezone.now()
        WorkerHeartbeat.objects.create(
            name="host-a:11", started_at=now, beat_at=now, task="run-7", task_started_at=now
        )
        WorkerHeartbeat.objects.create(
            name="host-b:12", started_at=now, beat_at=now - timedelta(minutes=10)
        )

        rows = staff_client.get("/").context["workers"]

        assert [(r["worker"].name, r["alive"]) for r in rows] == [
            ("host-a:11", True),
            ("host-b:12", False),
        ]

    def test_it_warns_when_no_worker_heartbeats(self, staff_client):
        assert b"No worker has sent a heartbeat" in staff_client.get("/").content

    def test_it_shows_this_months_spend_against_the_budget_and_the_80_percent_banner(
        self, staff_client
    ):
        installation = InstallationFactory(account_login="globex", monthly_budget_usd=Decimal("10"))
        repository = RepositoryFactory(installation=installation)
        pull_request = PullRequestFactory(repository=repository)
        ReviewFactory(pull_request=pull_request, cost_usd=Decimal("3.5"))
        assert b"globex has spent" not in staff_client.get("/").content

        ReviewFactory(pull_request=pull_request, cost_usd=Decimal("5"))
        page = staff_client.get("/")

        [spend] = [s for s in page.context["spend"] if s.installation == installation]
        assert (spend.spent, spend.reviews, spend.percent) == (Decimal("8.5"), 2, 85)
        assert b"globex has spent $8.50 of its $10.00 review budget this month" in page.content

    def test_its_chart_has_a_bar_per_day_with_reviews_and_cost(self, staff_client):
        review = ReviewFactory(cost_usd=Decimal("1.25"))
        ReviewFactory(cost_usd=Decimal("0.75"))
        _age(review, days=2)

        page = staff_client.get("/")

        chart = page.context["chart"]
        assert len(chart.bars) == 30
        assert [b.day.reviews for b in chart.bars[-3:]] == [1, 0, 1]
        assert (chart.total_reviews, chart.total_cost) == (2, Decimal("2.00"))
        today = timezone.localdate().isoformat()
        assert f"<title>{today}: 1 review, $0.75</title>" in page.content.decode()


class TestRepositories:
    def test_it_shows_policy_last_run_and_figures_counting_each_problem_once(self, staff_client):
        repository = RepositoryFactory(full_name="acme/api")
        repository.policy.comment_limit = 7
        repository.policy.min_severity = "high"
        repository.policy.save()
        pull_request = PullRequestFactory(repository=repository)
        first = ReviewFactory(pull_request=pull_request)
        second = ReviewFactory(pull_request=pull_request)
        # one problem carried across two reviews, and one more: two published problems
        FindingFactory(review=first, fingerprint="aa", published=True)
        FindingFactory(review=second, fingerprint="aa", published=True)
        FindingFactory(review=second, fingerprint="bb", github_comment_id=5)
        FindingFactory(review=second, fingerprint="cc", state="suppressed")
        for fate, fingerprint in (("fixed", "aa"), ("dismissed", "bb")):
            FindingOutcome.objects.create(
                pull_request=pull_request, repository=repository, reviewer=first.reviewer,
                fingerprint=fingerprint, category="bug", title="t", severity="high", fate=fate,
            )  # fmt: skip

        page = staff_client.get("/repos/")

        [row] = [r for r in page.context["rows"] if r["repository"] == repository]
        assert row["figures"] == figures(repository=repository)
        assert (row["figures"].published, row["figures"].fixed, row["figures"].dismissed) == (
            2,
            1,
            1,
        )
        assert row["last"] == second.run
        content = page.content.decode()
        assert "≥ high" in content and "7 comments" in content
        assert f"/admin/repos/repository/{repository.pk}/change/" in content
        assert "50 %" in content

    def test_reviewer_figures_are_the_outcomes_of_closed_pull_requests(self, staff_client):
        finding = FindingFactory(published=True)
        reviewer = finding.review.reviewer
        for fate, fingerprint in (
            ("fixed", "a"),
            ("fixed", "b"),
            ("dismissed", "c"),
            ("open", "d"),
        ):
            FindingOutcome.objects.create(
                pull_request=finding.pull_request, repository=finding.pull_request.repository,
                reviewer=reviewer, fingerprint=fingerprint, category="bug", title="t",
                severity="high", fate=fate,
            )  # fmt: skip
        rows = staff_client.get("/repos/").context["reviewers"]
        [row] = [r for r in rows if r["reviewer"] == reviewer]
        expected = figures(reviewer=reviewer)
        assert (
            (row["figures"].fixed, row["figures"].dismissed, row["figures"].left_open)
            == (
                expected.fixed,
                expected.dismissed,
                expected.left_open,
            )
            == (2, 1, 1)
        )
        assert row["figures"].acceptance == pytest.approx(2 / 3)


class TestPullRequestPage:
    def url(self, pull_request) -> str:
        return f"/repos/{pull_request.repository.full_name}/pulls/{pull_request.number}/"

    def test_it_lists_every_run_with_its_trigger_range_and_scope(self, staff_client):
        pull_request = PullRequestFactory()
        full = ReviewRunFactory(pull_request=pull_request, status="completed", base_sha="a" * 40)
        ReviewRunFactory(
            pull_request=pull_request, status="completed", trigger="synchronize",
            base_sha="b" * 40, head_sha="c" * 40, incremental_since="b" * 40,
        )  # fmt: skip

        content = staff_client.get(self.url(pull_request)).content.decode()

        assert "incremental since <code>bbbbbbb</code>" in content
        assert "<code>bbbbbbb…ccccccc</code>" in content
        assert f"<code>aaaaaaa…{full.head_sha[:7]}</code>" in content
        assert "synchronize" in content

    def test_a_problems_history_across_pushes_reads_opened_current_resolved(self, staff_client):
        pull_request = PullRequestFactory()
        first = ReviewFactory(pull_request=pull_request, head_sha="1" * 40)
        second = ReviewFactory(pull_request=pull_request, head_sha="2" * 40)
        older = FindingFactory(review=first, fingerprint="ff", first_seen_sha="1" * 40)
        newer = FindingFactory(
            review=second, fingerprint="ff", first_seen_sha="1" * 40, state="resolved",
            resolved_in_sha="3" * 40,
        )  # fmt: skip
        older.carried_to = newer
        older.save()

        page = staff_client.get(self.url(pull_request))

        [problem] = page.context["problems"]
        assert problem.latest == newer
        assert problem.history == [
            ("opened in", "1" * 40),
            ("still current in", "2" * 40),
            ("resolved in", "3" * 40),
        ]
        assert (
            "opened in <code>1111111</code>, still current in <code>2222222</code>, resolved in <code>3333333</code>"
            in page.content.decode()
        )

    def test_it_filters_findings_by_state_severity_and_reviewer(self, staff_client):
        pull_request = PullRequestFactory()
        other = ReviewerFactory(slug="claude")
        review = ReviewFactory(pull_request=pull_request)
        FindingFactory(review=review, title="Open high", severity="high")
        FindingFactory(review=review, title="Suppressed low", severity="low", state="suppressed",
                       suppression_reason="below the minimum severity (medium)")  # fmt: skip
        by_other = ReviewFactory(pull_request=pull_request, run__reviewer=other)
        FindingFactory(review=by_other, title="Claude's medium", severity="medium")

        def titles(**query):
            page = staff_client.get(self.url(pull_request), query)
            return sorted(p.latest.title for p in page.context["problems"])

        assert titles() == ["Claude's medium", "Open high", "Suppressed low"]
        assert titles(state="suppressed") == ["Suppressed low"]
        assert titles(severity="high") == ["Open high"]
        assert titles(reviewer="claude") == ["Claude's medium"]
        assert titles(state="open", severity="low") == []
        assert titles(state="bogus") == ["Claude's medium", "Open high", "Suppressed low"]


class TestRunPage:
    def test_it_shows_every_finding_with_suppression_reasons_and_what_was_posted(
        self, staff_client
    ):
        review = ReviewFactory()
        FindingFactory(review=review, title="Posted", published=True, github_comment_id=9,
                       github_comment_url="https://github.test/c/9")  # fmt: skip
        FindingFactory(review=review, title="Over the limit", state="suppressed",
                       suppression_reason="over the comment limit (1)")  # fmt: skip

        content = staff_client.get(f"/runs/{review.run.pk}/").content.decode()

        assert "Over the limit" in content and "over the comment limit (1)" in content
        assert "1 posted inline, 1 suppressed" in content
        assert "not posted" in content and "https://github.test/c/9" in content

    def test_a_findings_markdown_is_rendered_and_nothing_active_gets_through(self, staff_client):
        review = ReviewFactory()
        FindingFactory(review=review, title="Shell", body=(
            "Pass **a list**, not `shell=True`:\n\n```python\nsubprocess.run(['ls'])\n```\n\n"
            "<script>alert(1)</script> <img src=x onerror=alert(2)> "
            "[docs](https://docs.python.org/) [trap](javascript:alert(3)) "
            "![pixel](https://evil.test/p.png)"
        ))  # fmt: skip

        content = staff_client.get(f"/runs/{review.run.pk}/").content.decode()

        assert "<strong>a list</strong>" in content and "<code>shell=True</code>" in content
        assert '<code class="language-python">' in content
        assert '<a href="https://docs.python.org/" rel="noopener noreferrer nofollow">docs</a>' in (
            content
        )
        body = content.split('class="finding-body">', 1)[1].split("</div>", 1)[0]
        assert "<script" not in body and "<img" not in body  # tags only as text:
        assert "&lt;script&gt;" in body and "&lt;img src=x onerror=alert(2)&gt;" in body
        assert 'href="javascript' not in body and "evil.test" not in body

    def test_a_failed_run_says_what_to_do_and_offers_retry_to_who_may_act(self, operator_client):
        refused = GithubException(403, {"message": "Resource not accessible by integration"}, {})
        run = _failed(classify("post the review", refused), stage="publication")
        content = operator_client.get(f"/runs/{run.pk}/").content.decode()
        assert "Grant the App Pull requests: write" in content
        assert f'action="/runs/{run.pk}/retry"' in content

    def test_the_read_only_role_sees_no_retry_and_may_not_retry(self, staff_client):
        run = _failed(CloneError("git timed out after 300s (fetch)", permanent=True,
                                 code="clone-timeout"))  # fmt: skip
        content = staff_client.get(f"/runs/{run.pk}/").content.decode()
        assert f'action="/runs/{run.pk}/retry"' not in content

        assert staff_client.post(f"/runs/{run.pk}/retry").status_code == 403
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED
        assert queued_tasks() == []

    def test_retry_queues_a_failed_run_again_with_fresh_attempts(self, operator_client):
        run = _failed(_clone_error("fetch the head", DENIED))
        ReviewRun.objects.filter(pk=run.pk).update(attempts=3)

        response = operator_client.post(f"/runs/{run.pk}/retry")

        assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
        run.refresh_from_db()
        assert (run.status, run.attempts, run.reason) == (RunStatus.QUEUED, 0, "")
        assert queued_tasks("reviews.tasks.run_process") == [
            ("reviews.tasks.run_process", (run.pk,))
        ]
        # only failed runs retry
        assert operator_client.post(f"/runs/{run.pk}/retry").status_code == 302
        assert len(queued_tasks("reviews.tasks.run_process")) == 1

    def test_a_run_in_flight_is_followed_live_and_a_finished_one_is_not(self, staff_client):
        run = ReviewRunFactory(status=RunStatus.RUNNING, stage="sandbox", attempts=1)
        content = staff_client.get(f"/runs/{run.pk}/").content.decode()
        assert f'data-live="/runs/{run.pk}/status"' in content

        before = staff_client.get(f"/runs/{run.pk}/status").json()
        assert before == {"status": "running", "stage": "sandbox", "final": False,
                          "version": "running:sandbox:0:1"}  # fmt: skip
        ReviewRun.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, stage="")
        after = staff_client.get(f"/runs/{run.pk}/status").json()
        assert after["final"] and after["version"] != before["version"]
        assert "data-live" not in staff_client.get(f"/runs/{run.pk}/").content.decode()


class TestDiagnostics:
    def test_it_lists_failures_of_each_stage_by_cause_with_what_to_do(self, staff_client):
        _failed(_clone_error("fetch the head", DENIED))
        _failed(_clone_error("fetch the head", DENIED))
        _failed(_clone_error("fetch the head", GONE))
        _failed(_clone_error("fetch the head", DENIED), hours_ago=24 * 10)  # outside 7 days

        page = staff_client.get("/diagnostics/")

        rows = {r.stage: r for r in page.context["failures"]}
        assert list(rows) == [
            "admission",
            "clone",
            "sandbox",
            "provider",
            "validation",
            "publication",
        ]
        assert rows["clone"].count == 3
        assert [(a.key, n) for a, n in rows["clone"].causes] == [
            ("clone-access", 2),
            ("clone-commit-gone", 1),
        ]
        assert rows["sandbox"].count == 0
        assert (
            "Grant the GitHub App the repository permission Contents: read" in page.content.decode()
        )
        # and whose the fix is: the App's permission is the operator's setup
        assert "yours to fix: configuration, a key, a permission" in page.content.decode()
        # with its namespaced id (tasuku/errors.py), to search the logs with
        assert '<code class="muted">clone:yours:access</code>' in page.content.decode()
        assert (
            staff_client.get("/diagnostics/", {"window": "30d"}).context["failures"][1].count == 4
        )

    def test_failures_are_grouped_by_their_errors_code_not_their_words(self, staff_client):
        # The same cause in new words, and words of another cause under this one's code.
        _failed(CloneError("Wholly new words for a token without Contents: read.",
                           permanent=True, code="clone-access"))  # fmt: skip
        _failed(CloneError("the commit is not on GitHub any more (not our ref)",
                           permanent=True, code="clone-access"))  # fmt: skip
        _failed(_clone_error("fetch the head", DENIED))
        before = _failed(_clone_error("fetch the head", GONE))
        ReviewRun.objects.filter(pk=before.pk).update(error_code="")  # recorded before codes

        page = staff_client.get("/diagnostics/")

        clone = next(r for r in page.context["failures"] if r.stage == "clone")
        assert sorted((a.key, n) for a, n in clone.causes) == [("clone-access", 3), ("unknown", 1)]
        assert clone.advice.key == "unknown"  # the most recent: no code, no cause

    def test_the_run_page_advises_by_the_errors_code(self, staff_client):
        run = _failed(SandboxError("Reworded: nothing to run the engine with.", permanent=True,
                                   code="docker-image"))  # fmt: skip
        content = staff_client.get(f"/runs/{run.pk}/").content.decode()
        assert "Build it: docker build -f sandbox/images/Dockerfile" in content

    def test_admission_decisions_are_searchable_by_repository_and_pull_request(self, staff_client):
        WebhookDeliveryFactory(event="pull_request", action="opened", decision="skipped",
                               repository_full_name="acme/api", pr_number=7,
                               outcome="skipped acme/api#7: draft pull request")  # fmt: skip
        WebhookDeliveryFactory(event="pull_request", action="opened", decision="admitted",
                               repository_full_name="acme/api", pr_number=8,
                               outcome="admitted acme/api#8: opened")  # fmt: skip
        WebhookDeliveryFactory(event="ping", outcome="GitHub's test delivery")

        def outcomes(**query):
            page = staff_client.get("/diagnostics/", query)
            return [d.outcome for d in page.context["page"]]

        assert len(outcomes()) == 2
        assert outcomes(q="acme/api#7") == ["skipped acme/api#7: draft pull request"]
        assert outcomes(q="ACME/api", decision="admitted") == ["admitted acme/api#8: opened"]
        assert outcomes(q="acme/web") == []
        assert outcomes(q="not a repository") == []


class TestSearch:
    def test_owner_repo_number_opens_the_pull_request(self, staff_client):
        pull_request = PullRequestFactory(
            repository=RepositoryFactory(full_name="acme/shop"), number=7
        )
        for text in ("acme/shop#7", "https://github.com/acme/shop/pull/7", "ACME/Shop 7"):
            response = staff_client.get("/search/", {"q": text})
            assert response.status_code == 302, text
            assert response["Location"] == f"/repos/acme/shop/pulls/{pull_request.number}/"

    def test_an_unknown_pull_request_shows_what_its_deliveries_said(self, staff_client):
        RepositoryFactory(full_name="acme/shop")
        WebhookDeliveryFactory(event="pull_request", repository_full_name="acme/shop",
                               pr_number=9, status="failed", last_error="GitHub answered 502")  # fmt: skip

        content = staff_client.get("/search/", {"q": "acme/shop#9"}).content.decode()

        assert "Tasuku knows no pull request acme/shop#9" in content
        assert "GitHub answered 502" in content

    def test_a_repository_lists_its_pull_requests_and_nonsense_says_how_to_search(
        self, staff_client
    ):
        repository = RepositoryFactory(full_name="acme/shop")
        run = ReviewRunFactory(pull_request=PullRequestFactory(repository=repository, number=3))
        content = staff_client.get("/search/", {"q": "acme/shop"}).content.decode()
        assert "/repos/acme/shop/pulls/3/" in content and f"/runs/{run.pk}/" in content
        assert (
            "is not a repository or a pull request"
            in staff_client.get("/search/", {"q": "what?"}).content.decode()
        )

    def test_every_page_has_the_search_box(self, staff_client):
        run = ReviewRunFactory()
        for url in ("/", "/repos/", f"/runs/{run.pk}/", "/diagnostics/", "/status/", "/tasks/"):
            assert b'action="/search/"' in staff_client.get(url).content, url


def test_new_pages_need_a_staff_login(client):
    run = ReviewRunFactory(status=RunStatus.FAILED)
    for url in ("/diagnostics/", "/search/?q=a/b", f"/runs/{run.pk}/status"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    assert client.post(f"/runs/{run.pk}/retry").status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


class TestFirstSteps:
    """A new install's overview: the way to a first review, not tables of zeros."""

    def test_a_fresh_install_shows_the_checklist_with_each_next_step(self, staff_client, settings):
        settings.GITHUB_APP_ID = ""
        page = staff_client.get("/").content.decode()
        assert "Getting started" in page and "Runs by outcome" not in page
        assert "<strong>GitHub App connected</strong> — Missing: GITHUB_APP_ID" in page
        assert 'href="/setup/github/">Set up the GitHub App</a>' in page
        assert "No worker heartbeats: start one" in page
        assert "manage.py review &lt;pull request URL&gt;" in page

    def test_each_step_is_ticked_as_it_happens_and_the_list_goes_when_all_are(
        self, staff_client, settings, test_app
    ):
        settings.GITHUB_APP_ID, settings.GITHUB_PRIVATE_KEY = (
            str(test_app.app_id),
            test_app.private_key,
        )
        settings.GITHUB_WEBHOOK_SECRET = "s"
        WebhookDeliveryFactory(event="installation")
        WorkerHeartbeat.objects.create(
            name="host:1", started_at=timezone.now(), beat_at=timezone.now()
        )
        page = staff_client.get("/").content.decode()
        assert page.count('<span class="pill completed">done</span>') == 3
        assert "<strong>A first review</strong> — Open a pull request" in page
        ReviewRunFactory(status=RunStatus.COMPLETED)  # a repository of the App's
        page = staff_client.get("/").content.decode()
        assert "Getting started" not in page and "Runs by outcome" in page
