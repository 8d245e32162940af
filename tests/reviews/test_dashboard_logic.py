"""The dashboard's pure parts, without the database: what a failure most likely means,
what the search box was given, the daily chart's geometry, a problem's history."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from repos.refs import ref_parse
from reviews.dashboard.charts import Day, daily_chart
from reviews.dashboard.selectors import problem_history
from reviews.diagnosis import STAGES, UNKNOWN, diagnose, known_causes
from reviews.models import Finding, Review


@pytest.mark.parametrize(
    ("stage", "error", "key"),
    [
        ("clone", "Could not fetch: access denied (remote: 403). The App may not read this "
                  "repository: grant it Contents: read.", "clone-access"),
        ("clone", "Could not fetch: the commit is not on GitHub any more (not our ref)",
         "clone-commit-gone"),
        ("publication", "Could not post a review: GitHub answered 403 (Resource not accessible "
                        "by integration) — the App may lack a permission this needs",
         "github-permission"),
        ("publication", "Could not post a review: rate limited by GitHub (403: API rate limit)",
         "github-rate-limit"),
        ("provider", "The anthropic API refused the API key (HTTP 401): invalid x-api-key",
         "provider-key"),
        ("provider", "The openai API does not know the model 'gpt-9' (HTTP 404): no such model",
         "provider-model"),
        ("sandbox", "The claude engine did not finish within 1800s and was stopped.",
         "sandbox-timeout"),
        ("sandbox", "The engine image tasuku-engine:latest is not on the Docker host. Build it",
         "docker-image"),
        ("validation", "The static engine's output is not a ReviewResult: Field required",
         "engine-output"),
        ("sandbox", "the worker stopped while the run was at sandbox (last attempt)",
         "worker-lost"),
        ("admission", "Could not read pull request acme/shop#7: GitHub answered 502 (Bad Gateway)",
         "transient"),
    ],
)  # fmt: skip
def test_a_failure_is_matched_to_its_likely_cause(stage, error, key):
    assert diagnose(stage, error).key == key


def test_an_error_it_does_not_know_says_so_and_a_rule_of_another_stage_does_not_apply():
    assert diagnose("sandbox", "something odd happened") is UNKNOWN
    # "access denied" means a missing Contents permission only when cloning
    assert diagnose("provider", "access denied") is UNKNOWN


def test_every_stage_has_common_causes_with_something_to_do():
    for stage in STAGES:
        causes = known_causes(stage)
        assert causes and all(advice.action for advice in causes)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme/shop#7", "acme/shop#7"),
        ("  acme/shop # 7 ", "acme/shop#7"),
        ("acme/shop 7", "acme/shop#7"),
        ("acme/shop/pull/7", "acme/shop#7"),
        ("https://github.com/acme/shop/pull/7/files", "acme/shop#7"),
        ("acme/my.repo-2", "acme/my.repo-2"),
        ("acme", None),
        ("", None),
        ("drop table; --", None),
    ],
)
def test_the_search_box_understands_owner_repo_and_number(text, expected):
    found = ref_parse(text)
    assert (str(found) if found else None) == expected


def test_the_chart_scales_bars_to_the_busiest_day_and_the_line_to_the_dearest():
    days = [
        Day(date(2026, 1, 1), 0, Decimal(0)),
        Day(date(2026, 1, 2), 5, Decimal("2")),
        Day(date(2026, 1, 3), 10, Decimal("1")),
    ]
    chart = daily_chart(days, width=300, height=100)
    assert [bar.height for bar in chart.bars] == [0, pytest.approx(33, abs=0.1), pytest.approx(66)]
    assert all(bar.y + bar.height == pytest.approx(chart.bottom) for bar in chart.bars)
    ys = [float(point.split(",")[1]) for point in chart.cost_points.split()]
    assert ys[1] == chart.top and ys[0] == chart.bottom and chart.top < ys[2] < chart.bottom
    assert (chart.total_reviews, chart.total_cost) == (15, Decimal("3"))


def test_an_empty_chart_draws_an_empty_axis():
    chart = daily_chart([])
    assert chart.bars == [] and chart.cost_points == "" and chart.max_reviews == 0


def test_a_problem_suppressed_then_published_then_outdated_reads_in_order():
    shas = ["a" * 40, "b" * 40, "c" * 40]
    findings = [
        Finding(review=Review(head_sha=shas[0]), state="suppressed"),
        Finding(review=Review(head_sha=shas[1]), first_seen_sha=shas[1]),
        Finding(
            review=Review(head_sha=shas[2]),
            state="outdated",
            first_seen_sha=shas[1],
            resolved_in_sha="d" * 40,
        ),  # fmt: skip
    ]
    assert problem_history(findings) == [
        ("suppressed in", shas[0]),
        ("still current in", shas[1]),
        ("still current in", shas[2]),
        ("outdated in", "d" * 40),
    ]
