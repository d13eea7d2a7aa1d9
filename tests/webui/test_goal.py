"""Goal mode in the web UI (real Chromium): set a goal above the composer, watch the runner go on by
itself until the goal is reached, and clear a goal; `/goal` typed in the composer does the same."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import expect

from tests.fakes.openai_server import Reply
from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send, thread_of

pytestmark = UI_TESTS


async def goal_of(stack: Stack, thread_id: str) -> object:
    async with httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": "tok-ana"}) as http:
        return (await http.get(f"/threads/{thread_id}/goal")).json()["goal"]


async def test_a_goal_set_in_the_bar_starts_its_first_step_says_what_follows_and_goes_on_until_reached(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(
        Reply(text="Draft one of the slogan.", when="A final slogan for Antler", chunk_delay=0.05),
        Reply(text="Final slogan: Antlers up!", when="Next step: polish it", chunk_delay=0.05),
    )
    stack.model.verdicts(
        {"verdict": "continue", "reason": "a draft only", "next_step": "polish it"},
        {"verdict": "done", "reason": "a final slogan"},
    )
    page = await open_page()
    await page.locator("#goal-open").click()
    await page.locator("#goal-input").fill("A final slogan for Antler")
    await page.locator("#goal-save").click()
    await expect(page.locator("#goal-objective")).to_have_text("A final slogan for Antler")
    # Set, it starts at once (the objective is the first step's message), and the page says what follows.
    await expect(page.locator(".msg-human .plain")).to_have_text(["A final slogan for Antler"])
    said = page.locator(".msg-note", has_text="Goal set: A final slogan for Antler")
    await expect(said).to_contain_text("goes on by itself")
    await expect(page.locator(".msg-ai .md").first).to_contain_text("Draft one of the slogan.")
    await page.screenshot(path=screenshots / "firsthour-goal-started.png")
    # Then the step the runner asked for itself, streamed into the same conversation.
    await expect(page.locator(".msg-ai .md").last).to_contain_text("Final slogan: Antlers up!")
    await expect(page.locator("#goal-open")).to_be_visible()  # reached: the goal is gone
    await expect(page.locator(".msg-ai .md")).to_have_count(2)
    await expect(page.locator(".msg-human")).to_have_count(1)  # the continuation's prompt is hidden
    assert await goal_of(stack, thread_of(page)) is None


async def test_goal_typed_in_the_composer_shows_and_clears(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(Reply(text="What is your budget?"))
    stack.model.verdicts({"verdict": "blocked", "question": "What is your budget?"})
    page = await open_page()
    await send(page, "/goal Plan a trip to Lisbon")
    await expect(page.locator(".msg-human .plain")).to_have_text("Plan a trip to Lisbon")
    await expect(page.locator("#goal-objective")).to_have_text("Plan a trip to Lisbon")
    await expect(page.locator("#goal-progress")).to_contain_text("waiting for your answer")
    thread = thread_of(page)
    await page.reload()
    await expect(page.locator("#goal-objective")).to_have_text("Plan a trip to Lisbon")  # after a reload too
    await page.locator("#goal-clear").click()
    await expect(page.locator("#goal-open")).to_be_visible()
    assert await goal_of(stack, thread) is None
