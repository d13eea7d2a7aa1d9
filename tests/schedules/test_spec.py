"""A cron task's first firing, forecast before the server fires it: as nats-server's cron reads the
expression (6 fields, seconds first; an IANA zone with its daylight-saving changes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedules.spec import build

BERLIN = "Europe/Berlin"


def first(cron: str, zone: str, now: datetime) -> datetime | None:
    return build("cron", {"cron": cron}, zone, now=now).first_run


def berlin(*parts: int) -> datetime:
    from zoneinfo import ZoneInfo

    return datetime(*parts, tzinfo=ZoneInfo(BERLIN)).astimezone(UTC)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("cron", "zone", "now", "expected"),
    [
        pytest.param(
            "0 8 * * 1-5",
            BERLIN,
            berlin(2026, 11, 27, 9, 0),
            berlin(2026, 11, 30, 8, 0),
            id="weekdays-after-friday",
        ),
        pytest.param(
            "30 15 9 * * *",
            BERLIN,
            berlin(2026, 11, 24, 9, 15, 29),
            berlin(2026, 11, 24, 9, 15, 30),
            id="seconds-first",
        ),
        pytest.param(
            "0 0 1 * mon",
            "UTC",
            datetime(2026, 11, 24, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            id="day-of-month-or-weekday",
        ),
        pytest.param(
            "0 30 2 * * *",
            BERLIN,
            berlin(2027, 3, 27, 3, 0),
            berlin(2027, 3, 29, 2, 30),
            id="a-time-the-clock-skips-is-skipped-that-day",
        ),
        pytest.param(
            "0 30 2 * * *",
            BERLIN,
            datetime(2026, 10, 25, 0, 30, 1, tzinfo=UTC),
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
            id="a-repeated-hour-fires-again",
        ),
        pytest.param(
            "0 9 * * *",
            "America/St_Johns",
            datetime(2026, 11, 24, 13, 0, tzinfo=UTC),
            datetime(2026, 11, 25, 12, 30, tzinfo=UTC),
            id="half-hour-zone",
        ),
    ],
)
def test_the_first_firing_of_a_cron_task_is_forecast_as_the_server_fires_it(
    cron: str, zone: str, now: datetime, expected: datetime
) -> None:
    assert first(cron, zone, now) == expected
