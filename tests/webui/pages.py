"""What the web UI tests do on a page: send a message, read which thread it opened, hold a short
conversation worth compacting."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from tests.fakes.openai_server import Reply


async def send(page, text: str, enter: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Type `text` in the composer and send it (with the Send button, or the Enter key)."""
    await page.locator("#input").fill(text)
    if enter:
        await page.locator("#input").press("Enter")
    else:
        await page.locator("#send").click()


def thread_of(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.url.split("#/t/", 1)[1])


async def two_answered_messages(page, model: Any) -> None:  # type: ignore[no-untyped-def]
    """The user's colour and town, each answered (a conversation to compact); then the summary is
    scripted: the user's colour is blue."""
    model.script(
        Reply(text="Blue it is.", when="colour is blue"),
        Reply(text="Lisbon, lovely.", when="town is Lisbon"),
    )
    await send(page, "My colour is blue")
    await expect(page.locator(".msg-ai .md")).to_have_text(["Blue it is."])
    await send(page, "My town is Lisbon")
    await expect(page.locator(".msg-ai .md")).to_have_text(["Blue it is.", "Lisbon, lovely."])
    model.script(Reply(text="- The user's colour is blue.", when="Context Extraction Assistant"))
