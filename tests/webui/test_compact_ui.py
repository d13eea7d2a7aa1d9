"""The web UI's Compact button: the older messages become one folded summary, and the chat goes on."""

from __future__ import annotations

from playwright.async_api import expect

from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import two_answered_messages

pytestmark = UI_TESTS


async def test_compact_folds_the_older_messages_into_a_summary(open_page: OpenPage, stack: Stack) -> None:
    page = await open_page()
    await two_answered_messages(page, stack.model)
    await page.locator("#compact").click()
    summary = page.locator(".msg-summary")
    await expect(summary.locator("summary")).to_have_text("Summary of earlier messages")
    await expect(page.locator(".msg-human .plain")).to_have_text(["My town is Lisbon"])
    await expect(page.locator(".msg-ai .md")).to_have_text(["Lisbon, lovely."])
    await summary.locator("summary").click()
    await expect(summary.locator(".plain")).to_contain_text("The user's colour is blue.")
    await expect(page.locator("#toast")).to_contain_text("Compacted: 2 earlier message(s)")
