"""The web UI's Compact button: the older messages become one folded summary, and the chat goes on."""

from __future__ import annotations

from playwright.async_api import expect

from tests.fakes.openai_server import Reply
from tests.webui.conftest import UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS


async def send(page, text: str) -> None:  # type: ignore[no-untyped-def]
    await page.locator("#input").fill(text)
    await page.locator("#send").click()


async def test_compact_folds_the_older_messages_into_a_summary(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(
        Reply(text="Blue it is.", when="colour is blue"),
        Reply(text="Lisbon, lovely.", when="town is Lisbon"),
    )
    page = await open_page()
    await send(page, "My colour is blue")
    await expect(page.locator(".msg-ai .md")).to_have_text(["Blue it is."])
    await send(page, "My town is Lisbon")
    await expect(page.locator(".msg-ai .md")).to_have_text(["Blue it is.", "Lisbon, lovely."])

    stack.model.script(Reply(text="- The user's colour is blue.", when="Context Extraction Assistant"))
    await page.locator("#compact").click()
    summary = page.locator(".msg-summary")
    await expect(summary.locator("summary")).to_have_text("Summary of earlier messages")
    await expect(page.locator(".msg-human .plain")).to_have_text(["My town is Lisbon"])
    await expect(page.locator(".msg-ai .md")).to_have_text(["Lisbon, lovely."])
    await summary.locator("summary").click()
    await expect(summary.locator(".plain")).to_contain_text("The user's colour is blue.")
    await expect(page.locator("#toast")).to_contain_text("Compacted: 2 earlier message(s)")
