"""The dashboard's pure parts, without the database: what the search box was given, the
daily chart's geometry, a problem's history. (What a failure means, by its error's code:
test_error_codes.py.)"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from repos.refs import ref_parse
from reviews.dashboard.charts import Day, daily_chart
from reviews.dashboard.selectors import problem_history
from reviews.models import Finding, Review


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
