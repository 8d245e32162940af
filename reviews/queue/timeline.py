"""Stage times: when each stage of a run's attempt started and how long it took.

`RunAttempt.stages` holds a list of `{"stage", "start", "seconds"}`: `start` in seconds
after the attempt started, `seconds` null while the stage is under way, and `"lost":
true` on the stage a lost worker was in (its end is only when the reaper noticed).
`reviews/queue/runs.py` writes it as the run moves from stage to stage and closes it with the
attempt; the run page draws it (`timeline`) and `/metrics` counts it (`histogram`).

Pure: lists and numbers in, lists and numbers out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import accumulate

# The stages a review walks through, in order (reviews/pipeline/flow.py `ctx.stage`): the
# histogram has a series for each even before one was timed, so that a dashboard's
# query finds them all from the first scrape.
PIPELINE_STAGES = ("admission", "clone", "sandbox", "validation", "publication")


def _seconds(value: float) -> float:
    # Milliseconds are finer than any stage worth drawing, and keep the row small.
    return round(max(value, 0.0), 3)


def offset(started_at: datetime, now: datetime) -> float:
    """Seconds from the attempt's start to `now` (never negative: the attempt's start is
    the claiming worker's clock, `now` may be another's)."""
    return _seconds((now - started_at).total_seconds())


def stage_enter(stages: list[dict], stage: str, at: float) -> list[dict]:
    """`stages` with the stage under way ended at `at` and `stage` begun there. Entering
    the stage already under way changes nothing (a stage is one span)."""
    if stages and stages[-1].get("seconds") is None and stages[-1].get("stage") == stage:
        return stages
    closed = stages_close(stages, at)
    return [*closed, {"stage": stage, "start": _seconds(at), "seconds": None}]


def stages_close(stages: list[dict], at: float, *, lost: bool = False) -> list[dict]:
    """`stages` with the stage under way ended at `at` (the attempt ended). `lost`: the
    worker died in it, so its end is when that was noticed, not when the work stopped."""
    if not stages or stages[-1].get("seconds") is not None:
        return list(stages)
    last = dict(stages[-1])
    last["seconds"] = _seconds(at - float(last.get("start") or 0.0))
    if lost:
        last["lost"] = True
    return [*stages[:-1], last]


# --- The run page ------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    stage: str
    start: float  # seconds after the attempt started
    started_at: datetime
    seconds: float  # so far, for the stage under way
    under_way: bool
    lost: bool
    left: float  # where its bar starts, in % of the attempt's length
    width: float  # its bar's length, in % of the attempt's length


@dataclass(frozen=True)
class Timeline:
    seconds: float  # the attempt's length (so far, while it runs)
    spans: list[Span] = field(default_factory=list)

    @property
    def accounted(self) -> float:
        """Seconds the stages account for (the rest: claiming the run, ending it)."""
        return sum(s.seconds for s in self.spans)


# A bar narrower than this is drawn this wide, so that a stage of a few milliseconds
# is still seen to have happened.
MIN_WIDTH = 0.5


def timeline(
    stages: list[dict], started_at: datetime, finished_at: datetime | None, now: datetime
) -> Timeline:
    """Each stage of an attempt as a bar on the attempt's length: where it starts and how
    long it is, both in % of that length."""
    end = offset(started_at, finished_at or now)
    spans = []
    for entry in stages or []:
        start = float(entry.get("start") or 0.0)
        under_way = entry.get("seconds") is None
        seconds = _seconds(end - start) if under_way else float(entry["seconds"])
        total = max(end, start + seconds, 1e-9)
        left = min(100.0, 100.0 * start / total)
        width = max(MIN_WIDTH, 100.0 * seconds / total)
        spans.append(
            Span(
                stage=str(entry.get("stage", "")),
                start=start,
                started_at=started_at + timedelta(seconds=start),
                seconds=seconds,
                under_way=under_way,
                lost=bool(entry.get("lost")),
                left=round(left, 2),
                width=round(min(width, 100.0 - left), 2) if left < 100.0 else MIN_WIDTH,
            )
        )
    return Timeline(seconds=end, spans=spans)


# --- /metrics ----------------------------------------------------------------------------


@dataclass
class StageHistogram:
    counts: list[int]  # per bucket (the last: over every bound), not cumulative
    total: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def buckets(self) -> list[int]:
        """Cumulative, as Prometheus has them: stages that took at most each bound."""
        return list(accumulate(self.counts[:-1]))


def histogram(
    attempts: Iterable[list[dict]], bounds: tuple[float, ...]
) -> dict[str, StageHistogram]:
    """Bucket counts of the stages' durations, by stage, over the attempts' stage lists.
    A stage still under way has no duration yet, and a lost worker's has none worth
    counting (it ran on until the reaper noticed): neither is counted."""

    def empty() -> StageHistogram:
        return StageHistogram(counts=[0] * (len(bounds) + 1))

    found = {stage: empty() for stage in PIPELINE_STAGES}
    for stages in attempts:
        for entry in stages or ():
            seconds = entry.get("seconds")
            if seconds is None or entry.get("lost"):
                continue
            figures = found.get(entry.get("stage"))
            if figures is None:
                figures = found[str(entry.get("stage", ""))] = empty()
            figures.counts[bisect_left(bounds, seconds)] += 1
            figures.total += seconds
    return found
