"""The App's webhook delivery log (App JWT): what GitHub tried to deliver to Tasuku, and
asking it to deliver one again. GitHub keeps the log for a few days and never redelivers
by itself."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from repos.github.schemas import parse_time
from repos.github.transport import Transport

NEXT_CURSOR = re.compile(r'<[^>]*[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"')


@dataclass(frozen=True)
class HookDelivery:
    """One attempt GitHub made (a redelivery is an attempt of its own, same `guid`)."""

    id: int
    guid: str  # what Tasuku stores as the delivery's X-GitHub-Delivery
    delivered_at: datetime
    redelivery: bool
    status_code: int  # what Tasuku answered (0: no answer)
    status: str
    event: str
    action: str | None
    installation_id: int | None

    @property
    def delivered(self) -> bool:
        return 200 <= self.status_code < 400


class HookCalls(Transport):
    def hook_deliveries(
        self, *, cursor: str = "", per_page: int = 100
    ) -> tuple[list[HookDelivery], str]:
        """A page of the App's delivery log, newest first, and the next page's cursor
        ("" at the end)."""

        def get() -> tuple[list[HookDelivery], str]:
            # Reference: https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook
            parameters: dict[str, str | int] = {"per_page": per_page}
            if cursor:
                parameters["cursor"] = cursor
            headers, data = self._integration().requester.requestJsonAndCheck(
                "GET", "/app/hook/deliveries", parameters=parameters
            )
            found = NEXT_CURSOR.search(str((headers or {}).get("link") or ""))
            items = [
                HookDelivery(
                    id=int(item["id"]),
                    guid=str(item["guid"]),
                    delivered_at=parse_time(item["delivered_at"]),
                    redelivery=bool(item.get("redelivery")),
                    status_code=int(item.get("status_code") or 0),
                    status=str(item.get("status") or ""),
                    event=str(item.get("event") or ""),
                    action=item.get("action"),
                    installation_id=item.get("installation_id"),
                )
                for item in data or []
            ]
            return items, found.group(1) if found else ""

        return self._app_call("list the App's webhook deliveries", get)

    def hook_redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to deliver one again (202: it will)."""

        def post() -> None:
            # Reference: https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook
            self._integration().requester.requestJsonAndCheck(
                "POST", f"/app/hook/deliveries/{delivery_id}/attempts"
            )

        # Asking twice makes GitHub deliver twice, which intake deduplicates: repeatable.
        self._app_call(f"ask GitHub to redeliver delivery {delivery_id}", post)
