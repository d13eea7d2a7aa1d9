"""The audit trail: who did what, as durable records on stream `<PREFIX>_AUDIT` (`<p>.audit.<action>`),
kept `bus.audit_max_age_days`. Nothing secret is written: tool arguments go in as a digest, and a
record's `detail` is a small mapping of plain facts (no tokens, passwords, keys: `_SECRET_KEYS` are
dropped whatever a caller passes).

Actions: `sign_in`, `sign_in_refused`, `account_created`, `role_changed`, `chat_linked`,
`run_started`, `run_refused`, `budget_refused`, `tool_call`, `tool_refused`, `admin_change`,
`schedule_changed`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import BaseModel, Field

from bus import Bus

log = logging.getLogger(__name__)

_ACTION = re.compile(r"^[a-z_]{1,40}$")
_SECRET_KEYS = re.compile(r"(token|secret|password|passwd|api[_-]?key|authorization|cookie)", re.I)


def _now() -> datetime:
    return datetime.now(UTC)


class AuditRecord(BaseModel):
    v: int = 1
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    at: datetime = Field(default_factory=_now)
    action: str
    user_id: str | None = None  # whom it is about (who signed in, whose run)
    actor: str | None = None  # who did it, when someone else (an admin)
    run_id: str | None = None
    thread_id: str | None = None
    outcome: str = "ok"
    detail: dict[str, Any] = Field(default_factory=dict)


_AGO = re.compile(r"^(\d{1,6})([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_when(text: str, field: str, now: datetime | None = None) -> datetime:
    """A filter's time: ISO 8601 with a time zone (`2026-11-27T10:00:00Z`) or an age (`90m`, `2h`, `7d`:
    that long ago). Raises ValueError naming `field` (the API's query parameter, the CLI's option)."""
    value = text.strip()
    ago = _AGO.match(value)
    if ago:
        return (now or _now()) - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{field}: {text!r} is not a time: give ISO 8601 with a zone "
            "(2026-11-27T10:00:00Z) or an age (2h, 7d)"
        ) from None
    if when.tzinfo is None:
        raise ValueError(f"{field}: give a time zone (e.g. 2026-11-27T10:00:00Z)")
    return when


def digest(value: Any) -> str:
    """A digest of a value (tool arguments): the same input is recognisable, its content is not kept."""
    text = json.dumps(value, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _clean(detail: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in detail.items():
        if _SECRET_KEYS.search(key):
            continue
        if isinstance(value, str | int | float | bool) or value is None:
            out[key] = value if not isinstance(value, str) else value[:500]
        elif isinstance(value, list | tuple):
            out[key] = [str(v)[:200] for v in list(value)[:50]]
        else:
            out[key] = str(value)[:500]
    return out


class AuditLog:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def record(
        self,
        action: str,
        *,
        user_id: str | None = None,
        actor: str | None = None,
        run_id: str | None = None,
        thread_id: str | None = None,
        outcome: str = "ok",
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Write one record; a failure to write is logged, never raised (auditing must not stop work)."""
        assert _ACTION.match(action), action
        record = AuditRecord(
            action=action,
            user_id=user_id,
            actor=actor,
            run_id=run_id,
            thread_id=thread_id,
            outcome=outcome,
            detail=_clean(detail or {}),
        )
        subject = self.bus.subjects.full(f"audit.{action}")
        try:
            await self.bus.js.publish(
                subject, record.model_dump_json().encode(), headers={"Nats-Msg-Id": f"audit:{record.id}"}
            )
        except Exception as exc:
            log.error("audit: could not write %s for %s: %s", action, user_id, exc)

    async def read(
        self,
        *,
        user_id: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """The newest `limit` records matching the filters, oldest first."""
        stream = self.bus.subjects.stream("AUDIT")
        subject = self.bus.subjects.full(f"audit.{action}" if action else "audit.>")
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME if since else DeliverPolicy.ALL,
            opt_start_time=since.astimezone(UTC) if since else None,  # nats-py writes it as RFC 3339
            filter_subject=subject,
        )
        try:
            info = await self.bus.js.stream_info(stream)
        except NotFoundError:
            return []
        if info.state.messages == 0:
            return []
        found: list[AuditRecord] = []
        sub = await self.bus.js.subscribe(subject, stream=stream, ordered_consumer=True, config=config)
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except TimeoutError:
                    break
                try:
                    record = AuditRecord.model_validate_json(msg.data)
                except ValueError:
                    continue
                if until and record.at > until:
                    break
                if user_id and user_id not in (record.user_id, record.actor):
                    continue
                found.append(record)
                if len(found) > limit:
                    found.pop(0)
                pending = msg.metadata.num_pending if msg.metadata else 0
                if pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        return found

    async def follow(
        self,
        *,
        user_id: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> AsyncIterator[AuditRecord]:
        """Records as they are written (from `since` when given, else from now), matching the filters;
        `skip`: ids already shown (a record at `since` that `read` gave)."""
        stream = self.bus.subjects.stream("AUDIT")
        subject = self.bus.subjects.full(f"audit.{action}" if action else "audit.>")
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME if since else DeliverPolicy.NEW,
            opt_start_time=since.astimezone(UTC) if since else None,
            filter_subject=subject,
        )
        sub = await self.bus.js.subscribe(subject, stream=stream, ordered_consumer=True, config=config)
        try:
            async for msg in sub.messages:
                try:
                    record = AuditRecord.model_validate_json(msg.data)
                except ValueError:
                    continue
                if record.id in skip or (user_id and user_id not in (record.user_id, record.actor)):
                    continue
                yield record
        finally:
            await sub.unsubscribe()


def record_line(record: AuditRecord) -> str:
    """One record as a line for a terminal: time, action, outcome, whom, run, then the detail."""
    parts = [record.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), record.action, record.outcome]
    for label, value in (("user", record.user_id), ("by", record.actor), ("run", record.run_id)):
        if value:
            parts.append(f"{label}={value}")
    parts += [f"{key}={value}" for key, value in record.detail.items()]
    return "  ".join(parts)
