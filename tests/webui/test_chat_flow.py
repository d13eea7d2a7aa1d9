"""The chat's flow in the web UI: typing while an answer streams, failed steps, stopping."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS


async def test_a_message_typed_while_an_answer_streams_is_queued_then_sent(
    open_page: OpenPage, stack: Stack
) -> None:
    hold = asyncio.Event()
    stack.model.script(Reply(text="First answer.", hold=hold), Reply(text="Second answer."))
    try:
        page = await open_page()
        await page.locator("#input").fill("first question")
        await page.locator("#input").press("Enter")
        await expect(page.locator("#stop")).to_be_visible()
        # typed and sent with Enter while the first answer is being written: kept, shown as queued
        await page.locator("#input").fill("second question")
        await page.locator("#input").press("Enter")
        await expect(page.locator("#queued .queued-text")).to_have_text("second question")
        await expect(page.locator("#input")).to_have_value("")
        hold.set()
        # the first answer ends, then the queued message goes and gets its own answer
        await expect(page.locator(".msg-human .plain")).to_have_text(["first question", "second question"])
        await expect(page.locator(".msg-ai .md")).to_have_text(["First answer.", "Second answer."])
        await expect(page.locator("#queued .queued-item")).to_have_count(0)
    finally:
        hold.set()


async def test_a_queued_message_can_be_taken_back_to_the_composer(open_page: OpenPage, stack: Stack) -> None:
    hold = asyncio.Event()
    stack.model.script(Reply(text="Only answer.", hold=hold))
    try:
        page = await open_page()
        await page.locator("#input").fill("a question")
        await page.locator("#input").press("Enter")
        await expect(page.locator("#stop")).to_be_visible()
        await page.locator("#input").fill("on second thought")
        await page.locator("#input").press("Enter")
        await page.get_by_role("button", name="Edit the queued message").click()
        await expect(page.locator("#queued .queued-item")).to_have_count(0)
        await expect(page.locator("#input")).to_have_value("on second thought")
        hold.set()
        await expect(page.locator(".msg-ai .md")).to_have_text(["Only answer."])
        await expect(page.locator("#input")).to_have_value("on second thought")  # not sent
        await expect(page.locator(".msg-human .plain")).to_have_text(["a question"])
    finally:
        hold.set()


async def test_a_failed_tool_step_shows_as_failed(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/etc/shadow"})]),
        Reply(text="I may not read that."),
    )
    page = await open_page()
    await page.locator("#input").fill("read the shadow file")
    await page.locator("#send").click()
    await expect(page.locator(".msg-ai .md")).to_have_text("I may not read that.")
    step = page.locator(".step[data-tool=read_file]")
    await expect(step).to_have_class("step step-error")
    await expect(step.locator(".step-icon")).to_have_text("!")
    # and so it stays after a reload (the thread's stored history says so too)
    await page.reload()
    await expect(page.locator(".step[data-tool=read_file]")).to_have_class("step step-error")
