"""Chat commands typed in the web UI's message box (real Chromium): what /help lists works here as in a
chat, answered in the conversation; none of it reaches the model. A usage is shown as usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send, thread_of, two_answered_messages

pytestmark = UI_TESTS


async def api(stack: Stack, path: str) -> Any:
    async with httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": "tok-ana"}) as http:
        answer = await http.get(path)
        answer.raise_for_status()
        return answer.json()


def asked(stack: Stack, text: str) -> bool:
    """Whether any request to the model carried `text` as something the user wrote."""
    return any(
        text in str(m.get("content"))
        for request in stack.model.requests
        for m in request.get("messages", [])
        if m.get("role") == "user"
    )


async def command(page: Page, text: str) -> None:
    """Type a command and wait for its answer in the conversation."""
    notes = page.locator(".msg-note")
    before = await notes.count()
    await send(page, text)
    await expect(notes).to_have_count(before + 1)


async def test_every_command_help_lists_is_answered_here_and_none_reaches_the_model(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    listed = [c["name"] for c in (await api(stack, "/commands"))["commands"]]
    assert {"help", "new", "status", "models", "memory", "goal", "compact", "schedule"} <= set(listed)
    page = await open_page()
    await command(page, "/help")
    help_note = page.locator(".msg-note").last
    for name in listed:
        await expect(help_note).to_contain_text(f"/{name} - ")
    await expect(help_note).to_contain_text("Skills (start a message with one to use it)")
    await page.screenshot(path=screenshots / "firsthour-help-note.png")

    answers = {
        "/status": "A new conversation",
        "/models": "Fake model",
        "/memory": "remember",
        "/goal": "No active goal",
        "/compact": "Nothing to compact",
        "/schedules": "no scheduled tasks",
        "/usage": "Today: ",
        "/connect": "Settings → Account",
        "/bootstrap": "works in chats",
        "/approve": "Nothing waits for your approval here",
        "/deny": "Nothing waits for your approval here",
    }
    for typed, answer in answers.items():
        await command(page, typed)
        await expect(page.locator(".msg-note").last).to_contain_text(answer)
    for typed in ("/schedule", "/unschedule"):  # they need words: their usage, shown as usage
        await command(page, typed)
        usage = page.locator(".msg-note").last
        await expect(usage).to_contain_text(f"Usage: {typed} ")
        await expect(usage).not_to_contain_text("could not")
    assert {"new", "help"} | {t[1:] for t in [*answers, "/schedule", "/unschedule"]} >= set(listed) - {"new"}

    await command(page, "/nosuch")
    unknown = page.locator(".msg-note").last
    await expect(unknown).to_contain_text("There is no command or skill called /nosuch")
    await send(page, "/new")
    await expect(page.locator(".msg-note")).to_have_count(0)  # a fresh chat
    await expect(page.locator("#empty")).to_be_visible()
    for typed in ["/help", *answers, "/schedule", "/unschedule", "/nosuch", "/new"]:
        assert not asked(stack, typed), f"{typed} went to the model"


async def test_compact_and_schedule_typed_in_the_box_do_what_they_say(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    page = await open_page()
    await two_answered_messages(page, stack.model)
    thread = thread_of(page)

    await command(page, "/compact")
    await expect(page.locator(".msg-note").last).to_contain_text("Compacted: 2 earlier message(s)")
    await expect(page.locator(".msg-summary summary")).to_have_text("Summary of earlier messages")

    await command(page, "/schedule every 1h water the plants")
    made = page.locator(".msg-note").last
    await expect(made).to_contain_text("Scheduled #1: every 1h: water the plants")
    await expect(made).to_contain_text("I will answer in this conversation")
    tasks = await api(stack, f"/threads/{thread}/scheduled-tasks")
    assert [(t["prompt"], t["schedule_spec"].get("every")) for t in tasks] == [("water the plants", "1h")]
    await command(page, "/schedules")
    await expect(page.locator(".msg-note").last).to_contain_text("1. every 1h: water the plants")
    await page.screenshot(path=screenshots / "firsthour-commands.png")
    await command(page, "/unschedule 1")
    await expect(page.locator(".msg-note").last).to_contain_text("Removed #1: every 1h: water the plants")
    assert await api(stack, f"/threads/{thread}/scheduled-tasks") == []
    for typed in ("/compact", "/schedule", "/unschedule"):
        assert not asked(stack, typed), f"{typed} went to the model"
