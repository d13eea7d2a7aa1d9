"""/schedule from a chat: the real Telegram adapter against its fake, router, scheduler and runner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest_asyncio

from config import AppConfig
from tests.fakes.telegram_server import FakeTelegram
from tests.support.schedules import reply_to, running_scheduler, said


@pytest_asyncio.fixture
async def stack(nats_url: str, telegram_stack: AppConfig) -> AsyncIterator[AppConfig]:
    async with running_scheduler(nats_url, telegram_stack):
        yield telegram_stack


async def test_a_task_scheduled_in_a_telegram_chat_answers_in_that_chat(
    telegram: FakeTelegram, stack: AppConfig
) -> None:
    await reply_to(telegram, 42, "/schedule every 2s say hello", "Scheduled #1: every 2s: say hello")
    await telegram.wait(lambda: said(telegram, 42, "You said: say hello"), timeout=60)
    assert not said(telegram, 43, "You said"), "only the chat that asked"
    await reply_to(telegram, 42, "/schedules", "1. every 2s: say hello")
    await reply_to(telegram, 43, "/schedules", "You have no scheduled tasks in this chat")
    await reply_to(telegram, 42, "/unschedule 1", "Removed #1: every 2s: say hello")


async def test_a_schedule_the_grammar_cannot_read_is_answered_with_the_usage(
    telegram: FakeTelegram, stack: AppConfig
) -> None:
    await reply_to(
        telegram,
        42,
        "/schedule every fortnight 08:00 water the plants",
        "I could not schedule that: every fortnight",
    )
    assert said(telegram, 42, "/schedule every weekday 08:00 Europe/Berlin")
    await reply_to(
        telegram, 42, "/schedule every day 08:00 Mars/Olympus water the plants", "unknown time zone"
    )
    await reply_to(telegram, 42, "/unschedule 3", "You have no scheduled tasks in this chat to remove")


async def test_the_chat_is_told_when_a_cron_task_fires_next_in_its_zone(
    telegram: FakeTelegram, stack: AppConfig
) -> None:
    now = datetime.now(ZoneInfo("Europe/Berlin"))
    due = now.replace(hour=8, minute=0, second=0, microsecond=0)
    while due <= now or due.weekday() > 4:
        due = (due + timedelta(days=1)).replace(hour=8)
    shown = f"(next {due.strftime('%a %Y-%m-%d')} 08:00 Europe/Berlin)"
    telegram.send_user_message("/schedule every weekday 08:00 Europe/Berlin summarize the news", chat_id=42)
    # The expression is shown as code: its stars are not Markdown emphasis.
    made = f"Scheduled #1: cron <code>0 0 8 * * 1-5</code> (Europe/Berlin): summarize the news {shown}"
    await telegram.wait(lambda: said(telegram, 42, made))
    telegram.send_user_message("/schedules", chat_id=42)
    listed = f"1. cron <code>0 0 8 * * 1-5</code> (Europe/Berlin): summarize the news {shown}"
    await telegram.wait(lambda: said(telegram, 42, listed))


async def test_schedule_with_nothing_after_it_shows_the_usage_not_a_failure(
    telegram: FakeTelegram, stack: AppConfig
) -> None:
    await reply_to(telegram, 44, "/schedule", "Usage: /schedule ")
    assert said(telegram, 44, "/schedule every weekday 08:00 Europe/Berlin summarize the news")
    assert not said(telegram, 44, "I could not schedule that"), "asking how is not a mistake"
    await reply_to(telegram, 44, "/unschedule", "Usage: /unschedule ")
    assert not said(telegram, 44, "1 to 0"), "no list to choose from"
