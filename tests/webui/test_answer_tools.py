"""What an answer offers in the web UI: copy buttons, code labels, follow-ups, times, token usage."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import PHONE, UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS

ANSWER = "Here is how:\n\n```python\nprint('deer')\n```\n\nThat is all."


async def test_an_answer_and_its_code_block_can_be_copied_and_the_code_names_its_language(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(Reply(text=ANSWER))
    page = await open_page()
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await send(page, "show me code")
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
    await send(page, "tell me about deer")
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
    await send(page, "count to five")
    await expect(page.locator(".msg-ai > .md")).to_have_text("One two three four five.")
    for _ in range(2):  # live, and from the thread's history after a reload
        await expect(page.locator(".msg-human .msg-time")).to_have_text(re.compile(r"\d{1,2}:\d{2}"))
        await expect(page.locator(".msg-ai .msg-usage")).to_have_text(re.compile(r"^\d[\d,]* tokens$"))
        await page.reload()


async def test_an_opened_tool_step_shows_its_result_above_the_composer(
    open_page: OpenPage, stack: Stack
) -> None:
    lines = "\n".join(f"echo line-{n}" for n in range(14))
    long_answer = "\n\n".join(f"Paragraph {n} about deer." for n in range(40))
    stack.model.script(
        Reply(text=long_answer),
        Reply(tool_calls=[ToolCall("bash", {"command": lines})]),
        Reply(text="Ran it."),
    )
    page = await open_page()
    # a conversation long enough that the newest step sits at the bottom, just above the composer
    await send(page, "tell me a lot")
    await expect(page.locator(".msg-ai > .md")).to_contain_text(["Paragraph 39 about deer."])
    await send(page, "run the lines")
    await expect(page.locator(".msg-ai > .md").last).to_have_text("Ran it.")
    step = page.locator(".step[data-tool=bash]")
    await step.locator("summary").click()
    result = step.locator(".step-io").last
    await expect(result).to_contain_text("line-13")
    composer = await page.locator("#composer").bounding_box()
    shown = await result.bounding_box()
    assert composer is not None
    assert shown is not None
    assert shown["y"] + shown["height"] <= composer["y"] + 1, "the result's end is above the composer"


async def test_files_shows_only_when_the_thread_has_files(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(Reply(text="No files here."))
    page = await open_page()
    await send(page, "just talk")
    await expect(page.locator(".msg-ai > .md")).to_have_text("No files here.")
    await expect(page.locator("#open-artifacts")).to_be_hidden()
    await page.reload()
    await expect(page.locator(".msg-ai > .md")).to_have_text("No files here.")
    await expect(page.locator("#open-artifacts")).to_be_hidden()


async def test_on_a_phone_send_stays_on_the_composers_row(open_page: OpenPage, stack: Stack) -> None:
    page = await open_page(size=PHONE)
    send = await page.locator("#send").bounding_box()
    attach = await page.locator("#attach").bounding_box()
    assert send is not None
    assert attach is not None
    assert abs(send["y"] - attach["y"]) < 4, "Send sits on the row of + Files, not on a row of its own"
    assert send["x"] + send["width"] <= PHONE["width"], "and inside the screen"


CODE_ANSWER = (
    "In Python:\n\n```python\ndef greet(name):\n    return f'hi {name}'  # wave\n```\n\n"
    "In a language nobody knows:\n\n```deerscript\nlet herd = 3 // deer\n```\n"
)


async def test_a_python_block_is_coloured_and_labelled_and_an_unknown_language_stays_plain(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(Reply(text=CODE_ANSWER, chunk_delay=0.01))
    page = await open_page()
    await page.evaluate(
        "window.__csp = []; document.addEventListener('securitypolicyviolation',"
        " (e) => window.__csp.push(e.violatedDirective))"
    )
    await send(page, "code in two languages")
    answer = page.locator(".msg-ai").last
    python, unknown = answer.locator(".code").first, answer.locator(".code").last
    await expect(answer.locator(".code")).to_have_count(2)
    await expect(page.locator("#stop")).to_be_hidden()  # the answer is drawn for good
    await expect(page.locator(".msg-ai.streaming")).to_have_count(0)
    await expect(python.locator(".code-lang")).to_have_text("python")
    await expect(python.locator("code .hljs-keyword").first).to_have_text("def")
    await expect(python.locator("code .hljs-comment")).to_have_text("# wave")
    await expect(python.locator("code")).to_have_text("def greet(name):\n    return f'hi {name}'  # wave\n")
    # the colours are really applied (the stylesheet knows the classes), and differ by theme
    colour = "(s) => getComputedStyle(document.querySelector(s)).color"
    keyword = ".msg-ai .code .hljs-keyword"
    plain = ".msg-ai .code code"
    await page.evaluate("document.documentElement.dataset.theme = 'light'")
    await answer.screenshot(path=screenshots / "code-light.png")
    light = await page.evaluate(colour, keyword)
    assert light != await page.evaluate(colour, plain)
    await page.evaluate("document.documentElement.dataset.theme = 'dark'")
    await answer.screenshot(path=screenshots / "code-dark.png")
    assert await page.evaluate(colour, keyword) not in (light, await page.evaluate(colour, plain))
    # a language the highlighter does not know: its name as the label, the code as plain text
    await expect(unknown.locator(".code-lang")).to_have_text("deerscript")
    await expect(unknown.locator("code")).to_have_text("let herd = 3 // deer\n")
    assert await unknown.locator("code span").count() == 0
    assert await page.evaluate("window.__csp") == []
