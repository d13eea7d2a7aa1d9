"""The words of `/schedule <when> <prompt>` (chats and `antler schedule add`), read into a schedule.

    every 30m <prompt>                              interval (s, m, h, d)
    every day 08:00 [Zone] <prompt>                 daily at a time (also: daily 08:00)
    every weekday 08:00 [Zone] <prompt>             Monday to Friday
    every monday,thursday 18:30 [Zone] <prompt>     on those days (mon, tue, ... too)
    at 2026-12-01 09:00 [Zone] <prompt>             once (at 09:00: today, or tomorrow if past)
    in 20m <prompt>                                 once, after a while
    cron "0 8 * * 1-5" [Zone] <prompt>              cron: 5 fields, or 6 with seconds first

`Zone` is an IANA name (Europe/Berlin, America/New_York, UTC); without one, UTC. Times may have
seconds (08:00:30).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schedules.spec import InvalidSchedule, check_zone, seconds_of
from skills.commands import SCHEDULE_USAGE

USAGE = SCHEDULE_USAGE  # the chat command's usage, as /help and the web UI show it

_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CRON = re.compile(r'^cron\s+["“”\'](?P<fields>[^"“”\']+)["“”\']\s*(?P<rest>.*)$', re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Parsed:
    schedule_type: str
    schedule_spec: dict[str, Any]
    timezone: str
    prompt: str


def _time(token: str) -> tuple[int, int, int]:
    match = _TIME.match(token)
    if not match:
        raise InvalidSchedule(f"not a time of day: {token!r} (write e.g. 08:00)")
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise InvalidSchedule(f"not a time of day: {token!r}")
    return hour, minute, second


def _zone(words: list[str]) -> str:
    """Take a leading zone name off `words` (one with a `/`, or UTC); UTC when there is none."""
    if words and ("/" in words[0] or words[0].upper() in ("UTC", "GMT")):
        name = words.pop(0)
        name = "UTC" if name.upper() in ("UTC", "GMT") else name
        check_zone(name)
        return name
    return "UTC"


def _days(token: str) -> str | None:
    """`weekday` -> 1-5, `mon,thu` -> 1,4; None when `token` names no days."""
    token = token.lower()
    if token in ("weekday", "weekdays"):
        return "1-5"
    if token in ("weekend", "weekends"):
        return "0,6"
    found = []
    for part in token.split(","):
        if part not in _day_names() and part.removesuffix("s") not in _day_names():
            return None
        found.append(str(_DAYS[part[:3]]))
    return ",".join(found)


def _day_names() -> set[str]:
    full = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
    return set(_DAYS) | set(full)


def _prompt(words: list[str]) -> str:
    prompt = " ".join(words).strip()
    if not prompt:
        raise InvalidSchedule("what should I do then? Write it after the time.\n\n" + USAGE)
    return prompt


def parse(text: str, *, now: datetime | None = None) -> Parsed:
    """Read `<when> <prompt>`.

    Raises:
        InvalidSchedule: the words are not a schedule this grammar knows, with the usage.
    """
    now = now or datetime.now(UTC)
    text = text.strip()
    cron = _CRON.match(text)
    if cron:
        words = cron.group("rest").split()
        zone = _zone(words)
        return Parsed("cron", {"cron": " ".join(cron.group("fields").split())}, zone, _prompt(words))
    words = text.split()
    if not words:
        raise InvalidSchedule(USAGE)
    head = words.pop(0).lower()
    if head == "daily":
        head, words = "every", ["day", *words]
    if head == "in" and words:
        seconds = seconds_of(words.pop(0))
        run_at = (now + timedelta(seconds=seconds)).astimezone(UTC).replace(microsecond=0)
        return Parsed("once", {"run_at": run_at.isoformat()}, "UTC", _prompt(words))
    if head == "at" and words:
        date = words.pop(0) if _DATE.match(words[0]) else None
        if not words:
            raise InvalidSchedule(USAGE)
        hour, minute, second = _time(words.pop(0))
        zone = _zone(words)
        local_now = now.astimezone(check_zone(zone))
        if date:
            day = datetime.fromisoformat(date).date()
        else:
            day = local_now.date()
            if (hour, minute, second) <= (local_now.hour, local_now.minute, local_now.second):
                day += timedelta(days=1)
        at = f"{day.isoformat()}T{hour:02d}:{minute:02d}:{second:02d}"
        return Parsed("once", {"run_at": at}, zone, _prompt(words))
    if head == "every" and words:
        what = words.pop(0)
        if _DURATION_LIKE.match(what):
            return Parsed("interval", {"every": what.lower()}, "UTC", _prompt(words))
        days = "*" if what.lower() in ("day", "days") else _days(what)
        if days is None or not words:
            raise InvalidSchedule(f"every {what}: not an interval or days I know.\n\n" + USAGE)
        hour, minute, second = _time(words.pop(0))
        zone = _zone(words)
        return Parsed("cron", {"cron": f"{second} {minute} {hour} * * {days}"}, zone, _prompt(words))
    raise InvalidSchedule(USAGE)


_DURATION_LIKE = re.compile(r"^\d+[smhd]$", re.IGNORECASE)
