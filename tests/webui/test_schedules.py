"""The schedules page: create with the builder, pause and resume, run now, and the history's link."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import expect

from tests.webui.conftest import UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS


async def test_a_schedule_is_built_paused_resumed_run_now_and_its_run_opened(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    page = await open_page(path="/#/settings/schedules")
    body = page.locator("#settings-body")
    await expect(body.get_by_text("No schedules yet.")).to_be_visible()
    await body.get_by_label("Title").fill("Morning news")
    await body.get_by_label("Prompt").fill("summarize the news")
    await body.get_by_label("Time", exact=True).fill("07:30")
    await body.get_by_label("Time zone").fill("Europe/Berlin")
    await body.get_by_role("button", name="Create schedule").click()
    card = body.locator(".card", has_text="Morning news")
    await expect(card).to_contain_text("weekdays at 07:30 (Europe/Berlin)")
    await expect(card).to_contain_text(re.compile(r"next \w{3}, .*07:30 \(Europe/Berlin\)"))
    await expect(card.locator(".badge")).to_have_text("enabled")
    await card.get_by_role("button", name="Pause").click()
    await expect(card.locator(".badge")).to_have_text("paused")
    await card.get_by_role("button", name="Resume").click()
    await expect(card.locator(".badge")).to_have_text("enabled")
    await card.get_by_role("button", name="Run now").click()
    run = card.locator(".history li")
    await expect(run).to_have_count(1, timeout=40_000)
    await expect(run).to_contain_text("manual")
    await expect(card.locator(".task-figures")).to_contain_text("· 1 run")  # counted at once, no reload
    await page.screenshot(path=screenshots / "schedules.png")
    await run.get_by_role("link", name="open").click()
    await expect(page.locator("#messages")).to_contain_text("You said: summarize the news", timeout=40_000)
    await page.evaluate("location.hash = '#/settings/schedules'")
    await card.get_by_role("button", name="Delete").click()
    await page.locator("dialog.confirm").get_by_role("button", name="Delete").click()
    await expect(body).to_contain_text("No schedules yet.")


async def test_an_invalid_time_zone_is_shown_and_nothing_is_made(open_page: OpenPage, stack: Stack) -> None:
    page = await open_page(path="/#/settings/schedules")
    body = page.locator("#settings-body")
    await body.get_by_label("Title").fill("Nowhere")
    await body.get_by_label("Prompt").fill("x")
    await body.get_by_label("Time zone").fill("Mars/Olympus")
    await body.get_by_role("button", name="Create schedule").click()
    await expect(page.get_by_text("unknown time zone 'Mars/Olympus'")).to_be_visible()
    await expect(body.get_by_text("No schedules yet.")).to_be_visible()
