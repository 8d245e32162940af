"""The monthly budget of an installation's model reviews (docs/reviews.md, *What a review does*)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery, Sum, Value
from django.utils import timezone

from repos.models import Installation
from reviews.models import BudgetAlert, MemoryFold, Review, ThreadReply

logger = logging.getLogger(__name__)

ALERT_AT = Decimal("0.8")


@dataclass(frozen=True)
class Budget:
    spent: Decimal
    cap: Decimal | None

    @property
    def share(self) -> Decimal | None:
        if not self.cap:
            return None
        return self.spent / self.cap

    @property
    def exhausted(self) -> bool:
        return self.cap is not None and self.spent >= self.cap


# How a run the monthly budget stopped says so, in its reason (the dashboard finds such
# runs by it: reviews/dashboard/selectors.py `budget_stopped`).
BUDGET_SPENT = "this month's review budget is spent"


def month_start(now=None) -> date:
    return (now or timezone.now()).date().replace(day=1)


def installation_budget(installation: Installation, *, now=None) -> Budget:
    """This month's recorded spend of the installation's reviews (with folding them into
    the repositories' memories and answering replies) against its cap."""
    start = month_start(now)

    def total(rows):  # this month's sum of a table's costs, as a subquery
        return Subquery(
            rows.filter(created_at__date__gte=start)
            .order_by()
            .annotate(one=Value(1))
            .values("one")
            .annotate(total=Sum("cost_usd"))
            .values("total")
        )

    # One statement: the reviews, and — spend too — folding them into the repositories'
    # memories and a model reviewer's answers to replies in its threads.
    sums = (
        Installation.objects.filter(pk=installation.pk)
        .annotate(
            reviews=total(
                Review.objects.filter(pull_request__repository__installation=OuterRef("pk"))
            ),
            folds=total(MemoryFold.objects.filter(repository__installation=OuterRef("pk"))),
            replies=total(
                ThreadReply.objects.filter(
                    finding__pull_request__repository__installation=OuterRef("pk")
                )
            ),
        )
        .values_list("reviews", "folds", "replies")
        .first()
    )
    spent, folded, replies = (v or Decimal("0") for v in (sums or (None, None, None)))
    return Budget(
        spent=Decimal(spent) + Decimal(folded) + Decimal(replies),
        cap=installation.monthly_budget_usd,
    )


def budget_alert(installation: Installation, budget: Budget, *, now=None) -> BudgetAlert | None:
    """Record (once a month) and log that 80 % of the cap is spent; None if not due or
    already recorded this month."""
    share = budget.share
    if share is None or share < ALERT_AT:
        return None
    try:
        with transaction.atomic():
            alert = BudgetAlert.objects.create(
                installation=installation,
                month=month_start(now),
                spent_usd=budget.spent,
                cap_usd=budget.cap,
            )
    except IntegrityError:
        return None  # already alerted this month (the unique constraint decides)
    logger.warning(
        "budget: %s has spent $%s of its $%s monthly cap (%d%%)",
        installation,
        budget.spent.quantize(Decimal("0.01")),
        budget.cap,
        int(share * 100),
    )
    return alert
