"""What an operator's tools read: /metrics (Prometheus text), /healthz, the status
page's health and schedules, worker heartbeats, and the GitHub API usage counts."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.utils import ConnectionHandler
from django.utils import timezone
from django_q.models import Schedule
from prometheus_client.parser import text_string_to_metric_families

from repos import github
from repos.github import RepoRef, usage
from repos.models import GitHubApiUsage
from repos.services import github_usage_flush
from reviews.models import ReviewRun, RunStatus, WorkerHeartbeat
from reviews.queue import workers
from tests.factories import (
    InstallationFactory,
    PullRequestFactory,
    RepositoryFactory,
    ReviewFactory,
    ReviewRunFactory,
    WebhookDeliveryFactory,
)

pytestmark = pytest.mark.django_db


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture(autouse=True)
def _no_usage_from_other_tests():
    usage.usage_take()
    yield
    usage.usage_take()


class TestMetrics:
    def test_it_needs_a_staff_login_or_the_metrics_token(self, client, settings, staff_client):
        settings.TASUKU_METRICS_TOKEN = ""
        from django.test import Client

        anonymous = Client()
        assert anonymous.get("/metrics").status_code == 401
        assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
        settings.TASUKU_METRICS_TOKEN = "s3cret"
        assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        scraped = anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
        assert scraped.status_code == 200
        assert scraped["Content-Type"].startswith("text/plain; version=0.0.4")
        assert staff_client.get("/metrics").status_code == 200

    def test_it_reports_deliveries_runs_queue_durations_tokens_and_cost(self, staff_client):
        WebhookDeliveryFactory(status="processed")
        WebhookDeliveryFactory(status="failed")
        WebhookDeliveryFactory(status="failed")
        now = timezone.now()
        for seconds in (10, 100, 4000):
            ReviewRunFactory(status=RunStatus.COMPLETED, started_at=now - timedelta(seconds=seconds),
                             finished_at=now)  # fmt: skip
        queued = ReviewRunFactory(status=RunStatus.QUEUED)
        ReviewRun.objects.filter(pk=queued.pk).update(created_at=now - timedelta(minutes=5))
        ReviewFactory(
            model="claude-x", input_tokens=1000, output_tokens=200, cost_usd=Decimal("0.5")
        )
        ReviewFactory(
            model="claude-x", input_tokens=500, output_tokens=100, cost_usd=Decimal("0.25")
        )
        ReviewFactory(model="")  # the static engine: no model

        got = _samples(staff_client.get("/metrics").content.decode())

        assert got[("tasuku_webhook_deliveries", (("status", "failed"),))] == 2
        assert got[("tasuku_webhook_deliveries", (("status", "processed"),))] == 1
        assert got[("tasuku_webhook_deliveries_received_total", ())] == 3
        # 3 completed above, 3 more made by the reviews, 1 queued
        assert got[("tasuku_review_runs", (("status", "completed"),))] == 6
        assert got[("tasuku_review_runs", (("status", "queued"),))] == 1
        assert got[("tasuku_review_queue_depth", ())] == 1
        assert 299 <= got[("tasuku_review_queue_oldest_age_seconds", ())] < 400
        assert got[("tasuku_review_run_duration_seconds_bucket", (("le", "15.0"),))] == 1
        assert got[("tasuku_review_run_duration_seconds_bucket", (("le", "120.0"),))] == 2
        assert got[("tasuku_review_run_duration_seconds_bucket", (("le", "2700.0"),))] == 2
        assert got[("tasuku_review_run_duration_seconds_bucket", (("le", "+Inf"),))] == 3
        assert got[("tasuku_review_run_duration_seconds_count", ())] == 3
        assert got[("tasuku_review_run_duration_seconds_sum", ())] == pytest.approx(4110, abs=1)
        model = (("direction", "input"), ("model", "claude-x"))
        assert got[("tasuku_model_tokens_total", model)] == 1500
        assert (
            got[("tasuku_model_tokens_total", (("direction", "output"), ("model", "claude-x")))]
            == 300
        )
        assert got[("tasuku_model_cost_usd_total", (("model", "claude-x"),))] == pytest.approx(0.75)

    def test_it_reports_this_months_spend_against_each_budget(self, staff_client):
        installation = InstallationFactory(
            account_login="initech", github_id=77, monthly_budget_usd=Decimal("20")
        )
        ReviewFactory(
            pull_request=PullRequestFactory(
                repository=RepositoryFactory(installation=installation)
            ),
            cost_usd=Decimal("4.5"),
        )
        got = _samples(staff_client.get("/metrics").content.decode())
        labels = (("account", "initech"), ("installation_id", "77"))
        assert got[("tasuku_budget_spent_usd", labels)] == pytest.approx(4.5)
        assert got[("tasuku_budget_cap_usd", labels)] == 20

    def test_github_calls_and_the_rate_limit_left_are_counted_across_processes(
        self, fake_github, staff_client
    ):
        fake_github.add_installation(31, "hooli")
        fake_github.add_repo("hooli/app", installation_id=31)
        InstallationFactory(github_id=31, account_login="hooli")
        app_id = str(next(iter(fake_github.apps)))
        gateway = github.gateway()
        # Three calls left of the installation's 5,000 this hour (every answer says so).
        fake_github.limits.primary(31, remaining=3, reset_in=600)
        # GitHub rate limits the first call; the retry goes through (2 left after it).
        fake_github.rate_limit(1, path=r"/repos/hooli/app$")
        gateway.repository_get(RepoRef(31, None, "hooli/app"))
        fake_github.inject(1, status=404, path=r"/pulls/99$")
        with pytest.raises(github.GitHubError):
            gateway.pull_request_get(RepoRef(31, None, "hooli/app"), number=99)
        # Another process's counts, already in the table, add up with this one's.
        GitHubApiUsage.objects.create(
            app_id=app_id, installation_id=31, calls=10, errors=1, updated_at=timezone.now()
        )

        got = _samples(staff_client.get("/metrics").content.decode())

        labels = (("account", "hooli"), ("app_id", app_id), ("installation_id", "31"))
        assert got[("tasuku_github_api_calls_total", (*labels, ("outcome", "ok")))] == 10
        assert got[("tasuku_github_api_calls_total", (*labels, ("outcome", "error")))] == 3
        assert got[("tasuku_github_rate_limit_remaining", labels)] == 2
        assert got[("tasuku_github_rate_limit_limit", labels)] == 5000
        app = (("account", "app"), ("app_id", app_id), ("installation_id", "0"))
        assert got[("tasuku_github_api_calls_total", (*app, ("outcome", "ok")))] >= 1  # a token

    def test_a_failed_flush_keeps_the_counts_for_the_next_one(self, monkeypatch):
        usage.usage_record("1", 5, object(), failed=False)
        monkeypatch.setattr(GitHubApiUsage.objects, "filter", _raise)
        assert github_usage_flush() == 0
        monkeypatch.undo()
        assert github_usage_flush() == 1
        assert GitHubApiUsage.objects.get(installation_id=5).calls == 1
        usage.usage_record("1", 5, object(), failed=True)
        github_usage_flush()
        row = GitHubApiUsage.objects.get(installation_id=5)
        assert (row.calls, row.errors) == (2, 1)

    def test_a_flush_cut_off_from_the_database_says_so_once_for_the_outage(
        self, monkeypatch, caplog
    ):
        """The process's one warning for an outage (tasuku/outage.py), not one more of
        its own: a worker's heartbeat that just wrote, then found the database gone
        while it recorded the usage, said it twice."""
        from django.db import OperationalError

        from tasuku import outage

        monkeypatch.setattr(outage, "OUTAGE", outage.Outage())

        def gone(*args, **kwargs):
            raise OperationalError("server closed the connection unexpectedly")

        usage.usage_record("1", 6, object(), failed=False)
        with monkeypatch.context() as cut:
            cut.setattr(GitHubApiUsage.objects, "filter", gone)
            assert github_usage_flush() == 0
            assert github_usage_flush() == 0
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1, warnings
        assert "the database cannot be reached (recording GitHub usage" in warnings[0]
        assert github_usage_flush() == 1  # kept, and written once it answers
        assert GitHubApiUsage.objects.get(installation_id=6).calls == 1
        assert "the database answers again" in caplog.records[-1].getMessage()
        assert not outage.OUTAGE.down


def _raise(*args, **kwargs):
    raise RuntimeError("the database is gone")


class TestHealth:
    def test_healthz_answers_ok_without_a_login(self, client):
        from django.core.management import call_command

        call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.json()["status"] == "ok"
        assert client.get("/livez").json() == {"status": "ok"}

    def test_health_is_answered_by_address_while_every_page_keeps_its_hosts(self):
        """A container's health check asks 127.0.0.1, a load balancer the node's address:
        the health endpoints answer them, and only them, whatever ALLOWED_HOSTS says."""
        from wsgiref.util import setup_testing_defaults

        from django.core.management import call_command

        from tests.helpers import wsgi_serve

        call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115

        def get(path: str) -> tuple[int, bytes, dict]:
            environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "HTTP_HOST": "10.1.2.3:8000"}
            setup_testing_defaults(environ)
            status, headers, body = wsgi_serve(environ)
            return status, body, dict(headers)

        status, body, headers = get("/healthz")
        assert status == 200 and b'"status": "ok"' in body, body
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert get("/livez")[0] == 200
        assert get("/admin/login/")[0] == 400

    def test_healthz_is_not_ready_without_the_schedules_or_the_static_files(self, client, settings):
        from django.contrib.staticfiles.storage import staticfiles_storage

        response = client.get("/healthz")  # a deployment that registered no schedules
        assert response.status_code == 503
        assert "tasuku: sweep webhook deliveries" in response.json()["schedules"]
        assert client.get("/livez").status_code == 200  # alive, not ready
        from django.core.management import call_command

        call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115
        # Production's storage, and no `collectstatic` run (an empty STATIC_ROOT).
        settings.STATIC_ROOT = str(settings.BASE_DIR / "nonexistent-staticfiles")
        settings.STORAGES = {**settings.STORAGES, "staticfiles": {
            "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}  # fmt: skip
        # (the settings fixture's change makes Django build the storage afresh)
        assert type(staticfiles_storage._wrapped).__name__ != "StaticFilesStorage"
        response = client.get("/healthz")
        assert response.status_code == 503
        assert "collectstatic" in response.json()["static"]

    def test_healthz_answers_503_when_the_database_is_unreachable(
        self, client, monkeypatch, settings
    ):
        database = dict(settings.DATABASES["default"])
        if database["ENGINE"].endswith("sqlite3"):
            database["NAME"] = "/nonexistent/folder/tasuku.sqlite3"
        else:
            database.update(HOST="127.0.0.1", PORT="1")  # nothing listens there
        database.pop("TEST", None)
        unreachable = ConnectionHandler({"default": database})
        monkeypatch.setattr("webhooks.health.connections", unreachable)

        response = client.get("/healthz")

        assert response.status_code == 503
        assert response.json()["status"] == "unavailable"
        assert "OperationalError" in response.json()["database"]

    def test_the_status_page_shows_health_and_when_each_schedule_last_ran(self, staff_client):
        from django.core.management import call_command

        call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115
        Schedule.objects.filter(name="tasuku: sweep webhook deliveries").update(
            next_run=timezone.now() - timedelta(minutes=10)
        )

        page = staff_client.get("/status/")

        content = page.content.decode()
        assert page.context["database"].ok
        assert "tasuku: sweep webhook deliveries" in content
        assert "overdue: is a worker running?" in content
        assert "tasks waiting" in content

    def test_a_schedule_just_due_is_not_overdue_only_one_late_past_its_period(self, staff_client):
        from django.core.management import call_command

        call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115
        # django-q2's scheduler looks about every 30 s: every schedule just came due.
        Schedule.objects.update(next_run=timezone.now() - timedelta(seconds=40))
        assert "overdue" not in staff_client.get("/status/").content.decode()
        Schedule.objects.filter(name="tasuku: sweep review-pass tasks").update(
            next_run=timezone.now() - timedelta(minutes=3)
        )
        assert staff_client.get("/status/").content.decode().count("overdue:") == 1

    def test_the_read_only_role_sees_no_delivery_retry_and_may_not_retry(self, staff_client):
        delivery = WebhookDeliveryFactory(status="failed", last_error="boom")
        assert b">Retry<" not in staff_client.get("/status/").content
        assert b">Retry<" not in staff_client.get(f"/status/deliveries/{delivery.pk}/").content
        assert staff_client.post(f"/status/deliveries/{delivery.pk}/retry").status_code == 403
        delivery.refresh_from_db()
        assert delivery.status == "failed"


class TestWorkerHeartbeats:
    def test_a_heartbeat_records_the_task_in_hand_and_counts_finished_ones(self):
        started = timezone.now()
        workers.task_started(task={"name": "run-9"})
        workers.heartbeat_write("host:1", started_at=started)
        row = WorkerHeartbeat.objects.get(name="host:1")
        assert (row.task, row.tasks_done) == ("run-9", 0)

        workers.task_finished()
        workers.heartbeat_write("host:1", started_at=started)
        row.refresh_from_db()
        assert (row.task, row.tasks_done, row.started_at) == ("", 1, started)
        workers.task_finished()
        workers.heartbeat_write("host:1", started_at=started)
        row.refresh_from_db()
        assert row.tasks_done == 2

    def test_a_worker_that_stopped_cleanly_says_stopped_and_old_rows_are_forgotten(
        self, staff_client
    ):
        now = timezone.now()
        workers.heartbeat_write("host:7", started_at=now)
        workers.heartbeat_write("host:8", started_at=now)
        WorkerHeartbeat.objects.filter(name="host:8").update(beat_at=now - timedelta(minutes=5))
        workers.heartbeat_stopped("host:7")
        workers._stopping.clear()  # (this test process goes on)
        page = staff_client.get("/").content.decode()
        assert "<code>host:7</code>" in page and "stopped" in page
        assert "silent" in page  # host:8: killed, or hung
        # A day later both rows are forgotten; a live worker's is not.
        workers.heartbeat_write("host:9", started_at=now, now=now + timedelta(days=1))
        assert workers.heartbeats_prune(now + timedelta(days=1, minutes=1)) == 2
        assert list(WorkerHeartbeat.objects.values_list("name", flat=True)) == ["host:9"]

    def test_a_worker_stopping_without_its_database_says_so_and_stops(self, monkeypatch, caplog):
        from django.db import InterfaceError, OperationalError

        for error in (OperationalError("the server closed the connection"),
                      InterfaceError("connection already closed")):  # fmt: skip

            def gone(*args, error=error, **kwargs):
                raise error

            monkeypatch.setattr(WorkerHeartbeat.objects, "filter", gone)
            workers.heartbeat_stopped("host:7")  # no raise: the process stops all the same
            workers._stopping.clear()
        assert caplog.text.count("worker host:7 could not record that it stopped") == 2
        # A bug is not a lost database: it is raised.
        monkeypatch.setattr(WorkerHeartbeat.objects, "filter", lambda *a, **k: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            workers.heartbeat_stopped("host:7")
        workers._stopping.clear()


@pytest.mark.django_db
def test_a_workspace_root_that_cannot_hold_a_checkout_fails_the_check_and_healthz(
    client, settings, tmp_path
):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    call_command("setup_schedules", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.TASUKU_WORKSPACE_ROOT = str(tmp_path / "workspaces")  # never created
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "does not exist" in response.json()["workspace"]
    with pytest.raises(SystemCheckError, match=r"tasuku\.E022.*workspaces does not exist"):
        call_command("check")

    (tmp_path / "workspaces").mkdir()
    assert client.get("/healthz").status_code == 200
    settings.TASUKU_WORKSPACE_MIN_FREE_MB = 10**12  # more than any disk has
    response = client.get("/healthz")
    assert response.status_code == 503 and "MB free" in response.json()["workspace"]


def test_metrics_show_each_installations_shared_write_budget_and_its_waits(staff_client):
    from repos.github.budget import URGENT, SharedBudget, writes_for
    from repos.github.pacing import WriteLimits

    InstallationFactory(github_id=77, account_login="acme")
    clock = [timezone.now().timestamp()]
    budget = SharedBudget(
        WriteLimits(burst=2, interval=1.0),
        max_wait=60,
        clock=lambda: clock[0],
        sleep=lambda s: clock.__setitem__(0, clock[0] + s),
    )
    with writes_for(URGENT):
        for _ in range(3):
            budget.wait(("4242", 77))
    budget.pause(("4242", 77), 30, "You have exceeded a secondary rate limit")

    got = _samples(staff_client.get("/metrics").content.decode())
    labels = (("account", "acme"), ("installation_id", "77"))
    assert got[("tasuku_github_writes_total", labels)] == 3
    assert got[("tasuku_github_write_waits_total", labels)] == 1
    assert got[("tasuku_github_write_wait_seconds_total", labels)] == pytest.approx(1.0)
    assert got[("tasuku_github_write_pauses_total", labels)] == 1
    assert 25 < got[("tasuku_github_write_paused_seconds", labels)] <= 31
    assert got[("tasuku_github_writes_this_hour", labels)] >= 1


def test_the_run_page_shows_a_write_waiting_for_the_budget(staff_client):
    run = ReviewRunFactory(status=RunStatus.RUNNING, stage="publication", attempts=1)
    ReviewRun.objects.filter(pk=run.pk).update(
        write_wait_until=timezone.now() + timedelta(seconds=40),
        write_wait_reason="the write budget",
        write_waited=12.5,
    )
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "GitHub write budget" in page and "waiting until" in page
    assert "12.5 s waited in all" in page
