"""Per-person budgets: tokens and cost per UTC day and month, counted in KV `<prefix>_usage` so every
runner and subagent executor of the cluster adds to, and checks, the same counters.

One key per person, `person.<digest of user id>`, value `{user_id, day, day_tokens, day_cost,
month, month_tokens, month_cost}` (`day` `20261127`, `month` `202611`: the periods the counts are
of; a count of an earlier period reads as 0 and starts again at the next call). Written with
compare-and-set, so two processes never lose each other's tokens: a call costs one read and one
write. Earlier versions kept a key per period (`day.<stamp>.<digest>`, `month.<stamp>.<digest>`):
a person's first count after an upgrade starts from those, and a person not counted since is read
from them (looked for only where such keys exist: an installation made by this version never
reads them). The bucket keeps a key 62 days after its last write.

`UsageBook.refusal(user_id, budget)` is asked before each model call: a sentence naming the limit
and when it resets when the person has used it up, else None. `UsageBook.add` counts a finished call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError, NotFoundError
from nats.js.kv import KeyValue

from access.roles import _digest
from bus import Bus
from config import AppConfig
from config.access import BudgetConfig

log = logging.getLogger(__name__)

BUCKET = "usage"
PERIODS = ("day", "month")
ADD_TRIES = 100  # compare-and-set rounds a count may lose to other runners' counts before it gives up


def _stamp(period: str, at: datetime) -> str:
    return at.strftime("%Y%m%d" if period == "day" else "%Y%m")


def resets_at(period: str, at: datetime) -> datetime:
    """When the period `at` falls in ends (UTC midnight, or the first of the next month)."""
    start = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return start + timedelta(days=1)
    first = start.replace(day=1)
    return (first + timedelta(days=32)).replace(day=1)


def call_cost(config: AppConfig, model_name: str | None, input_tokens: int, output_tokens: int) -> float:
    """What a call cost at its model's configured prices (0 when it has none)."""
    model = config.get_model(model_name)
    if model is None:
        return 0.0
    cost = (model.input_price_per_million or 0.0) * input_tokens
    cost += (model.output_price_per_million or 0.0) * output_tokens
    return cost / 1_000_000


@dataclass(frozen=True)
class PeriodUsage:
    period: str
    tokens: int
    cost: float
    resets_at: datetime
    token_limit: int | None = None
    cost_limit: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "tokens": self.tokens,
            "cost": round(self.cost, 6),
            "token_limit": self.token_limit,
            "cost_limit": self.cost_limit,
            "resets_at": self.resets_at.isoformat(),
        }


def _person_key(user_id: str) -> str:
    return f"person.{_digest(user_id)}"


def _period_key(period: str, stamp: str, user_id: str) -> str:
    """An earlier version's key: one period's count."""
    return f"{period}.{stamp}.{_digest(user_id)}"


class UsageBook:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self._earlier_kept: bool | None = None  # whether an earlier version's keys are in the bucket

    @classmethod
    async def open(cls, bus: Bus) -> UsageBook:
        return cls(await bus.js.key_value(bus.subjects.bucket(BUCKET)))

    async def _get(self, key: str) -> tuple[dict[str, Any], int]:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return {}, 0
        try:
            found = json.loads(entry.value or b"{}")
        except ValueError:
            found = {}
        return (found if isinstance(found, dict) else {}), entry.revision or 0

    async def _counts(self, user_id: str, now: datetime) -> dict[str, tuple[int, float]]:
        """The person's (tokens, cost) by period, now: their key's, else an earlier version's keys."""
        found, revision = await self._get(_person_key(user_id))
        if revision:
            return _current(found, now)
        return await self._earlier_counts(user_id, now)

    async def _earlier_counts(self, user_id: str, now: datetime) -> dict[str, tuple[int, float]]:
        counts = {period: (0, 0.0) for period in PERIODS}
        if not await self._earlier_keys_kept():
            return counts  # an installation made by this version: nothing to look up for anyone
        for period in PERIODS:
            value, _ = await self._get(_period_key(period, _stamp(period, now), user_id))
            counts[period] = (int(value.get("tokens", 0)), float(value.get("cost", 0.0)))
        return counts

    async def usage(
        self, user_id: str, budget: BudgetConfig | None = None, at: datetime | None = None
    ) -> list[PeriodUsage]:
        """The person's use this day and this month (with the role's limits when `budget` is given)."""
        now = at or datetime.now(UTC)
        counts = await self._counts(user_id, now)
        return [
            PeriodUsage(
                period=period,
                tokens=counts[period][0],
                cost=counts[period][1],
                resets_at=resets_at(period, now),
                token_limit=getattr(budget, f"tokens_per_{period}", None),
                cost_limit=getattr(budget, f"cost_per_{period}", None),
            )
            for period in PERIODS
        ]

    async def everyone(self, at: datetime | None = None) -> dict[str, list[PeriodUsage]]:
        """Everyone's use this day and month, by user id (admins' view)."""
        now = at or datetime.now(UTC)
        try:
            keys = await self.kv.keys()
        except NoKeysError:
            keys = []
        people: dict[str, dict[str, tuple[int, float]]] = {}
        counted = {key.removeprefix("person.") for key in keys if key.startswith("person.")}
        for key in (k for k in keys if k.startswith("person.")):
            value, _ = await self._get(key)
            current = any(value.get(period) == _stamp(period, now) for period in PERIODS)
            if isinstance(value.get("user_id"), str) and current:  # else: nothing used this month
                people[value["user_id"]] = _current(value, now)
        for period in PERIODS:  # people counted only by an earlier version this period
            prefix = f"{period}.{_stamp(period, now)}."
            for key in (k for k in keys if k.startswith(prefix)):
                value, _ = await self._get(key)
                user_id = value.get("user_id")
                if not isinstance(user_id, str) or key.rsplit(".", 1)[-1] in counted:
                    continue
                counts = people.setdefault(user_id, {p: (0, 0.0) for p in PERIODS})
                counts[period] = (int(value.get("tokens", 0)), float(value.get("cost", 0.0)))
        return {
            user_id: [PeriodUsage(p, counts[p][0], counts[p][1], resets_at(p, now)) for p in PERIODS]
            for user_id, counts in people.items()
        }

    async def refusal(
        self, user_id: str, role: str, budget: BudgetConfig, at: datetime | None = None
    ) -> str | None:
        """Why the person may not call a model now (a limit used up, and when it resets); None: they may."""
        if not budget.limited:
            return None
        for use in await self.usage(user_id, budget, at):
            word = "daily" if use.period == "day" else "monthly"
            when = use.resets_at.strftime("%Y-%m-%d %H:%M UTC")
            if use.token_limit is not None and use.tokens >= use.token_limit:
                return (
                    f"You have used your {word} budget of {use.token_limit} tokens "
                    f"(role {role!r}: {use.tokens} used). It resets at {when}."
                )
            if use.cost_limit is not None and use.cost >= use.cost_limit:
                return (
                    f"You have used your {word} budget of {use.cost_limit:g} in model costs "
                    f"(role {role!r}: {use.cost:.4f} used). It resets at {when}."
                )
        return None

    async def add(self, user_id: str, tokens: int, cost: float, at: datetime | None = None) -> None:
        """Count a finished call's tokens and cost in this day's and month's counts."""
        if tokens <= 0 and cost <= 0:
            return
        now = at or datetime.now(UTC)
        key = _person_key(user_id)
        for attempt in range(ADD_TRIES):
            if attempt:  # another call counted meanwhile: add to its count, after a moment apart
                await asyncio.sleep(random.uniform(0, 0.002 * min(attempt, 10)))
            value, revision = await self._get(key)
            counts = _current(value, now) if revision else await self._earlier_counts(user_id, now)
            record: dict[str, Any] = {"user_id": user_id}
            for period in PERIODS:
                before_tokens, before_cost = counts[period]
                record[period] = _stamp(period, now)
                record[f"{period}_tokens"] = before_tokens + tokens
                record[f"{period}_cost"] = before_cost + cost
            try:
                if revision:
                    await self.kv.update(key, json.dumps(record).encode(), last=revision)
                else:
                    await self.kv.create(key, json.dumps(record).encode())
                return
            except KeyWrongLastSequenceError:
                continue
        log.warning("usage: could not count %d tokens of %s", tokens, user_id)

    async def _earlier_keys_kept(self) -> bool:
        """Whether the bucket holds any month's key of an earlier version (looked up once: one read
        of the bucket's first such message, found by the server's subject index)."""
        if self._earlier_kept is None:
            kv = self.kv
            try:
                await kv._js.get_msg(kv._stream, seq=1, subject=f"$KV.{kv._name}.month.>", next=True)
                self._earlier_kept = True
            except NotFoundError:
                self._earlier_kept = False
        return self._earlier_kept


def _current(value: dict[str, Any], now: datetime) -> dict[str, tuple[int, float]]:
    """A person key's (tokens, cost) by period; a count of an earlier day or month is 0 now."""
    counts = {}
    for period in PERIODS:
        if value.get(period) == _stamp(period, now):
            counts[period] = (int(value.get(f"{period}_tokens", 0)), float(value.get(f"{period}_cost", 0.0)))
        else:
            counts[period] = (0, 0.0)
    return counts


def usage_text(role: str, uses: list[PeriodUsage]) -> str:
    """A person's use as chat lines: each period's tokens and cost, against their role's limits."""
    lines = [f"Your usage (role {role!r}):"]
    for use in uses:
        word = "Today" if use.period == "day" else "This month"
        tokens = f"{use.tokens} tokens" + (f" of {use.token_limit}" if use.token_limit is not None else "")
        cost = f", cost {use.cost:.4f}" + (f" of {use.cost_limit:g}" if use.cost_limit is not None else "")
        when = use.resets_at.strftime("%Y-%m-%d %H:%M UTC")
        lines.append(
            f"{word}: {tokens}{cost if use.cost or use.cost_limit is not None else ''} (resets {when})"
        )
    return "\n".join(lines)
