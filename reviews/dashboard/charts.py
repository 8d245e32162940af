"""The overview's small chart of reviews and cost per day, as SVG geometry.

Pure: daily figures in, positions out; `templates/reviews/_daily_chart.html` draws them
(bars for reviews, a line for cost, each day's figures in a tooltip). No JavaScript.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal


@dataclass(frozen=True)
class Day:
    day: date
    reviews: int
    cost: Decimal


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    day: Day


@dataclass(frozen=True)
class DailyChart:
    width: int
    height: int
    top: int
    bottom: int  # y of the axis
    bars: list[Bar]
    cost_points: str  # an SVG polyline's points
    max_reviews: int
    max_cost: Decimal
    first: date | None
    last: date | None
    total_reviews: int
    total_cost: Decimal


def daily_chart(days: list[Day], *, width: int = 720, height: int = 140) -> DailyChart:
    """Bars scaled to the busiest day, the cost line to the dearest; an empty series
    draws an empty axis."""
    top, bottom, left, right = 16, height - 18, 4, width - 4
    span = max(len(days), 1)
    slot = (right - left) / span
    max_reviews = max((d.reviews for d in days), default=0)
    max_cost = max((d.cost for d in days), default=Decimal(0))
    bars, points = [], []
    for index, day in enumerate(days):
        x = left + index * slot
        bar_height = (bottom - top) * (day.reviews / max_reviews) if max_reviews else 0.0
        bars.append(
            Bar(
                x=round(x + slot * 0.15, 1),
                y=round(bottom - bar_height, 1),
                width=round(slot * 0.7, 1),
                height=round(bar_height, 1),
                day=day,
            )
        )
        share = float(day.cost / max_cost) if max_cost else 0.0
        points.append(f"{x + slot / 2:.1f},{bottom - (bottom - top) * share:.1f}")
    return DailyChart(
        width=width,
        height=height,
        top=top,
        bottom=bottom,
        bars=bars,
        cost_points=" ".join(points),
        max_reviews=max_reviews,
        max_cost=max_cost,
        first=days[0].day if days else None,
        last=days[-1].day if days else None,
        total_reviews=sum(d.reviews for d in days),
        total_cost=sum((d.cost for d in days), Decimal(0)),
    )
