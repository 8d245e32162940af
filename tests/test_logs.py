"""Log lines say what they are about (tasuku/logs.py): the run, attempt, delivery,
installation and repository in hand, at the end of a plain line or as keys of a JSON
line (TASUKU_LOG_FORMAT=json)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasuku.logs import ContextFilter, JsonFormatter, PlainFormatter, log_context
from tests.helpers import payload, post_webhook
from webhooks import routing, services
from webhooks.models import WebhookDelivery

ROOT = Path(__file__).resolve().parent.parent


def written(formatter: logging.Formatter, emit) -> str:  # type: ignore[no-untyped-def]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("tests.logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    return stream.getvalue()


def test_a_plain_line_ends_with_the_fields_of_the_work_in_hand():
    def emit(logger):
        logger.info("outside")
        with log_context(run=12, attempt=2, repository="acme/shop"):
            with log_context(installation=41, delivery=None):  # None: left out
                logger.info("published")
            logger.info("after the inner block")

    first, inner, outer = written(PlainFormatter(), emit).splitlines()
    assert first.endswith("INFO tests.logs outside")
    assert inner.endswith("published [run=12 attempt=2 installation=41 repository=acme/shop]")
    assert outer.endswith("after the inner block [run=12 attempt=2 repository=acme/shop]")


def test_a_json_line_has_every_field_as_a_key_and_the_traceback():
    def emit(logger):
        with log_context(delivery="72d3162e", event="pull_request"):
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                logger.exception("failed", extra={"status": 401})

    line = json.loads(written(JsonFormatter(), emit))
    assert {k: line[k] for k in ("level", "logger", "message", "delivery", "event", "status")} == {
        "level": "ERROR", "logger": "tests.logs", "message": "failed",
        "delivery": "72d3162e", "event": "pull_request", "status": 401,
    }  # fmt: skip
    assert "RuntimeError: boom" in line["exception"] and line["time"].endswith("+00:00")


def test_an_unknown_field_is_refused():
    with pytest.raises(ValueError, match="not a log field: user"), log_context(user="mallory"):
        pass


def handler_that_logs(event, *, delivery_id):
    logging.getLogger("tests.logs").warning("handled")
    return routing.Outcome("handled")


@pytest.mark.django_db
def test_a_line_written_while_a_delivery_is_processed_names_the_delivery(
    client, fake_github, test_app, monkeypatch
):
    monkeypatch.setitem(routing.HANDLERS, "check_suite", (handler_that_logs,))
    body = payload("check_suite", "completed")
    body["installation"] = {"id": 41, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDE="}
    post_webhook(client, "check_suite", body, secret=test_app.webhook_secret)
    delivery = WebhookDelivery.objects.get()
    line = written(JsonFormatter(), lambda logger: services.delivery_process(delivery.pk))
    record = json.loads(line)
    assert record["message"] == "handled"
    assert record["delivery"] == delivery.delivery_id and record["event"] == "check_suite"
    assert record["installation"] == 41


def test_a_log_format_tasuku_does_not_have_stops_it_with_the_choices():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["TASUKU_LOG_FORMAT"] = "xml"
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "TASUKU_LOG_FORMAT='xml': use plain (the default) or json." in done.stderr


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.addFilter(ContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.django_db
def test_the_lines_a_review_run_writes_name_its_run_attempt_and_repository(
    client, fake_github, test_app
):
    from reviews.models import ReviewRun
    from tests.gitworld import INSTALLATION, REPO, world_build
    from tests.helpers import drain_queue, pull_request_payload

    world = world_build(fake_github)
    body = pull_request_payload(world.fake, world.repo, world.pull, action="opened")
    post_webhook(client, "pull_request", body, secret=test_app.webhook_secret)
    kept = Kept()
    logging.getLogger().addHandler(kept)
    try:
        drain_queue()
    finally:
        logging.getLogger().removeHandler(kept)
    run = ReviewRun.objects.get()
    during = [r for r in kept.records if r.run is not None]
    assert during, [r.getMessage() for r in kept.records]
    assert {(r.run, r.attempt, r.repository, r.installation) for r in during} == {
        (run.pk, 1, REPO, INSTALLATION)
    }


def test_a_check_conclusions_lines_name_its_run(monkeypatch):
    from reviews import tasks
    from reviews.checks import gate

    monkeypatch.setattr(
        gate, "run_check_conclude", lambda pk: logging.getLogger("tests.logs").info("sent")
    )
    record = json.loads(written(JsonFormatter(), lambda logger: tasks.run_conclude(31)))
    assert (record["message"], record["run"]) == ("sent", 31)


def test_a_failures_error_id_is_a_key_of_a_json_line_and_ends_a_plain_one():
    def emit(logger):
        with log_context(run=7):
            logger.warning("failed", extra={"error_id": "github:yours:permission"})

    assert json.loads(written(JsonFormatter(), emit))["error_id"] == "github:yours:permission"
    assert (
        written(PlainFormatter(), emit)
        .rstrip()
        .endswith("failed [run=7 error=github:yours:permission]")
    )


def test_a_json_line_keeps_only_its_own_keys_and_writes_any_value():
    class Request:
        def __str__(self) -> str:
            return "<a request>"

    def emit(logger):
        logger.error("failed", extra={"request": Request(), "reason": Request()})

    line = json.loads(written(JsonFormatter(), emit))
    assert "request" not in line  # a record's other attributes stay out of the log store
    assert line["reason"] == "<a request>"  # a value JSON cannot hold is its text
