"""A task's schedule as the server understands it: the `Nats-Schedule` headers of its definition.

Three kinds, in DeerFlow's `schedule_type` / `schedule_spec` / `timezone` shape:

- `once`: `{"run_at": "2026-12-01T09:00"}` (no offset: read in `timezone`) -> `@at <UTC>`
- `cron`: `{"cron": "0 8 * * 1-5"}` (5 fields, as DeerFlow) or 6 fields with seconds first
  -> the 6-field expression, with `Nats-Schedule-Time-Zone` (the server applies the zone, DST included);
  its first firing is forecast with croniter (see `next_cron`), later ones are the server's word
- `interval`: `{"every": "30m"}` or `{"seconds": 1800}` -> `@every 1800s` (at least 1 s)

The zone is checked here (zoneinfo); a cron expression the server cannot read is refused by the
server when the definition is stored, and that refusal reaches the user as the same kind of error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

SCHEDULE = "Nats-Schedule"
TARGET = "Nats-Schedule-Target"
TIME_ZONE = "Nats-Schedule-Time-Zone"
NEXT = "Nats-Schedule-Next"  # on each firing: when the schedule fires next ("purge" after an @at)

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class InvalidSchedule(ValueError):
    """A schedule that cannot be fired: the message says what to write instead."""


@dataclass(frozen=True)
class Schedule:
    """A validated schedule: what to put in the definition's headers, and when it fires first
    (for a cron, as croniter forecasts it: None if it cannot)."""

    expression: str
    zone: str | None
    first_run: datetime | None
    spec: dict[str, Any]


def check_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC"
        ) from None


def seconds_of(text: str) -> int:
    """`30m` -> 1800; a bare number is seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise InvalidSchedule(f"not a duration: {text!r} (write e.g. 90s, 30m, 2h or 1d)")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


def cron_fields(expression: str) -> str:
    """A 5-field cron gets a seconds field (0) in front: the server reads 6 fields."""
    fields = str(expression).split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise InvalidSchedule(
            f"a cron expression has 5 fields (minute hour day month weekday) or 6 (seconds first), "
            f"not {len(fields)}: {expression!r}"
        )
    return " ".join(fields)


def next_cron(expression: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """When the server fires the 6-field `expression` in `zone` first after `after` (UTC, whole
    seconds); None when croniter cannot say (the server is the judge of what is valid).

    nats-server's cron (robfig's algorithm) and croniter agree on fields, names, `?`, steps, the
    day-of-month / day-of-week "or" and a repeated hour (it fires in both); they differ on a time
    the clock skips: croniter moves it to the end of the gap, the server skips that day. So a
    forecast whose wall-clock minute or hour the expression does not allow is passed over.
    """
    try:
        found = croniter(expression, after.astimezone(zone), second_at_beginning=True)
        allowed_minutes, allowed_hours = found.expanded[0], found.expanded[1]
        for _ in range(8):
            at: datetime = found.get_next(datetime)
            if _allows(allowed_minutes, at.minute) and _allows(allowed_hours, at.hour):
                return at.astimezone(UTC).replace(microsecond=0)
    except (CroniterError, ValueError, KeyError, OverflowError):
        return None
    return None


def _allows(values: list[Any], value: int) -> bool:
    return "*" in values or value in values


def build(
    schedule_type: str, spec: dict[str, Any], timezone: str, *, now: datetime | None = None
) -> Schedule:
    """Check a schedule and turn it into the server's expression.

    Raises:
        InvalidSchedule: an unknown kind or zone, a malformed spec, a `once` time not in the future.
    """
    zone = check_zone(timezone or "UTC")
    now = now or datetime.now(UTC)
    if schedule_type == "once":
        raw = spec.get("run_at")
        if not isinstance(raw, str):
            raise InvalidSchedule('a once schedule needs schedule_spec.run_at, e.g. "2026-12-01T09:00"')
        try:
            run_at = datetime.fromisoformat(raw)
        except ValueError:
            raise InvalidSchedule(f"run_at is not an ISO 8601 time: {raw!r}") from None
        if run_at.tzinfo is None:
            run_at = run_at.replace(tzinfo=zone)
        run_at = run_at.astimezone(UTC).replace(microsecond=0)
        if run_at <= now:
            raise InvalidSchedule(f"run_at {raw} is not in the future")
        return Schedule(f"@at {run_at.strftime('%Y-%m-%dT%H:%M:%SZ')}", None, run_at, {"run_at": raw})
    if schedule_type == "cron":
        raw = spec.get("cron")
        if not isinstance(raw, str):
            raise InvalidSchedule('a cron schedule needs schedule_spec.cron, e.g. "0 8 * * 1-5"')
        expression = cron_fields(raw)
        first = next_cron(expression, zone, now)
        return Schedule(expression, timezone or "UTC", first, {"cron": " ".join(raw.split())})
    if schedule_type == "interval":
        every = spec.get("every", spec.get("seconds"))
        if every is None:
            raise InvalidSchedule('an interval schedule needs schedule_spec.every, e.g. "30m"')
        seconds = seconds_of(str(every))
        if seconds < 1:
            raise InvalidSchedule("an interval must be at least 1 second")
        first = datetime.fromtimestamp(now.timestamp() + seconds, UTC).replace(microsecond=0)
        return Schedule(f"@every {seconds}s", None, first, {"every": str(every)})
    raise InvalidSchedule(f"unknown schedule_type {schedule_type!r}: once, cron or interval")


def headers(schedule: Schedule, target: str) -> dict[str, str]:
    """The definition's headers: fire `schedule` onto `target`."""
    found = {SCHEDULE: schedule.expression, TARGET: target}
    if schedule.zone:
        found[TIME_ZONE] = schedule.zone
    return found


def next_run(header: str | None) -> datetime | None:
    """When the server fires next, from a firing's `Nats-Schedule-Next` (None after the last)."""
    if not header or header == "purge":
        return None
    try:
        return datetime.fromisoformat(header.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
