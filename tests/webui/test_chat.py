"""Chatting in the web UI: streamed answers, safe Markdown, tool steps, titles, stop and reconnect."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import PHONE, UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS


async def send(page, text: str) -> None:  # type: ignore[no-untyped-def]
    await page.locator("#input").fill(text)
    await page.locator("#send").click()


async def run_status(stack: Stack, thread_id: str) -> str:
    async with httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": "tok-ana"}) as http:
        runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    return str(runs[0]["status"])


def thread_of(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.url.split("#/t/", 1)[1])


async def test_a_message_gets_a_streamed_answer_and_the_thread_list_shows_its_title(
    open_page: OpenPage, stack: Stack
) -> None:
    words = " ".join(f"word{n}" for n in range(40))
    stack.model.script(Reply(text=f"Streaming {words} finished.", chunk_delay=0.05))
    page = await open_page()
    await send(page, "tell me about deer")
    # the user's own words, then the answer while it is being written, then the whole answer
    await expect(page.locator(".msg-human .plain")).to_have_text("tell me about deer")
    await expect(page.locator(".msg-ai.streaming")).to_contain_text("Streaming")
    await expect(page.locator(".msg-ai .md")).to_contain_text("word39 finished.")
    await expect(page.locator(".msg-ai.streaming")).to_have_count(0)
    # the title the agent gave the thread, in the sidebar and the top bar
    await expect(page.locator(".thread-title")).to_contain_text(["Chat about tell me about"])
    await expect(page.locator("#chat-title")).to_have_text("Chat about tell me about")
