"""What the web UI tests do on a page: send a message, read which thread it opened."""

from __future__ import annotations


async def send(page, text: str) -> None:  # type: ignore[no-untyped-def]
    await page.locator("#input").fill(text)
    await page.locator("#send").click()


def thread_of(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.url.split("#/t/", 1)[1])
