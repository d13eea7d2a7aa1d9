"""What an answer offers in the web UI: copy buttons, code labels, follow-ups, times, token usage."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.fakes.openai_server import Reply
from tests.webui.conftest import UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS

ANSWER = "Here is how:\n\n```python\nprint('deer')\n```\n\nThat is all."


async def test_an_answer_and_its_code_block_can_be_copied_and_the_code_names_its_language(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(Reply(text=ANSWER))
    page = await open_page()
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.locator("#input").fill("show me code")
    await page.locator("#send").click()
    answer = page.locator(".msg-ai").last
    await expect(answer.locator(".code-lang")).to_have_text("python")
    await answer.get_by_role("button", name="Copy code").click()
    await expect(answer.get_by_role("button", name="Copy code")).to_have_text("Copied")
    assert await page.evaluate("navigator.clipboard.readText()") == "print('deer')\n"
    await answer.get_by_role("button", name="Copy answer").click()
    assert await page.evaluate("navigator.clipboard.readText()") == ANSWER


async def test_follow_up_suggestions_show_under_the_answer_and_one_click_asks_it(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(Reply(text="Deer live in herds."), Reply(text="There are three herds."))
    page = await open_page()
    await page.locator("#input").fill("tell me about deer")
    await page.locator("#send").click()
    chips = page.locator(".suggestions .suggestion")
    await expect(chips).to_have_text(["How many herds are there?", "Where do deer sleep?"])
    await chips.first.click()
    await expect(page.locator(".msg-human .plain")).to_have_text(
        ["tell me about deer", "How many herds are there?"]
    )
    await expect(page.locator(".msg-ai > .md")).to_have_text(
        ["Deer live in herds.", "There are three herds."]
    )


async def test_questions_show_when_they_were_sent_and_answers_their_token_usage(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(Reply(text="One two three four five."))
    page = await open_page()
    await page.locator("#input").fill("count to five")
    await page.locator("#send").click()
    await expect(page.locator(".msg-ai > .md")).to_have_text("One two three four five.")
    for _ in range(2):  # live, and from the thread's history after a reload
        await expect(page.locator(".msg-human .msg-time")).to_have_text(re.compile(r"\d{1,2}:\d{2}"))
        await expect(page.locator(".msg-ai .msg-usage")).to_have_text(re.compile(r"^\d[\d,]* tokens$"))
        await page.reload()
