"""Chatting in the web UI: streamed answers, safe Markdown, tool steps, titles, stop and reconnect."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import PHONE, UI_TESTS, OpenPage, Stack
from tests.webui.pages import send, thread_of

pytestmark = UI_TESTS


async def run_status(stack: Stack, thread_id: str) -> str:
    async with httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": "tok-ana"}) as http:
        runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    return str(runs[0]["status"])


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


MARKDOWN_WITH_TRAPS = """Here is the code:

```python
print('hi')
```

| city | temp |
| --- | --- |
| Lisbon | 21 |

<img src=x onerror="window.__pwned = 1">

[click me](javascript:window.__pwned=2)

<a href="javascript:window.__pwned=3">raw link</a>

<script>window.__pwned = 4</script>"""


async def test_markdown_renders_code_and_tables_and_model_output_runs_no_script(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(Reply(text=MARKDOWN_WITH_TRAPS))
    page = await open_page()
    await send(page, "show me <b>markdown</b>")
    answer = page.locator(".msg-ai .md")
    await expect(answer.locator("pre code")).to_have_text("print('hi')\n")
    await expect(answer.locator("table th")).to_have_text(["city", "temp"])
    await expect(answer.locator("table td")).to_have_text(["Lisbon", "21"])
    # the user's message is plain text: their tags are shown, not rendered
    await expect(page.locator(".msg-human .plain")).to_have_text("show me <b>markdown</b>")
    # the image is there, without its handler; the links are there, without their javascript: targets
    image = answer.locator("img")
    await expect(image).to_have_count(1)
    assert await image.get_attribute("onerror") is None
    assert await answer.locator("script").count() == 0
    for name in ("click me", "raw link"):
        link = answer.get_by_text(name)
        await expect(link).to_be_visible()
        href = await link.get_attribute("href")
        assert href is None or not href.lower().startswith("javascript:")
        await link.click()
    assert await page.evaluate("window.__pwned") is None


async def test_a_tool_call_shows_as_a_compact_step_that_opens_to_its_result(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo hello-from-bash"})]),
        Reply(text="I ran it."),
    )
    page = await open_page()
    await send(page, "run something")
    step = page.locator(".step[data-tool=bash]")
    await expect(step).to_contain_text("echo hello-from-bash")
    await expect(page.locator(".msg-ai .md")).to_contain_text("I ran it.")
    result = step.locator(".step-io").last
    await expect(result).to_be_hidden()  # folded until opened
    await step.locator("summary").click()
    await expect(result).to_contain_text("hello-from-bash")


async def test_stop_cancels_the_running_answer(open_page: OpenPage, stack: Stack) -> None:
    hold = asyncio.Event()
    stack.model.script(Reply(text="This answer never comes.", hold=hold))
    try:
        page = await open_page()
        await send(page, "take your time")
        stop = page.locator("#stop")
        await expect(stop).to_be_visible()
        await stop.click()
        await expect(page.locator(".run-note")).to_have_text("Stopped before the answer was finished.")
        await expect(page.locator(".run-error")).to_have_count(0)
        await expect(stop).to_be_hidden()
        assert await run_status(stack, thread_of(page)) == "interrupted"
        await expect(page.locator(".msg-ai .md")).to_have_count(0)
    finally:
        hold.set()


async def test_a_reload_mid_answer_reconnects_to_the_running_answer(
    open_page: OpenPage, stack: Stack
) -> None:
    hold = asyncio.Event()
    before = len(stack.model.agent_requests)
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo step-one"})]),
        Reply(text="The final answer arrived.", hold=hold),
    )
    try:
        page = await open_page()
        await send(page, "two steps please")
        await expect(page.locator(".step[data-tool=bash].step-done")).to_have_count(1)
        await stack.model.wait_for_requests(before + 2)  # the model is writing the answer now
        await page.reload()
        # after the reload: the thread, its finished step, and the run still going
        await expect(page.locator(".step[data-tool=bash].step-done")).to_have_count(1)
        await expect(page.locator("#stop")).to_be_visible()
        hold.set()
        # the answer arrives through the rejoined stream
        await expect(page.locator(".msg-ai .md")).to_have_text("The final answer arrived.")
        await expect(page.locator("#stop")).to_be_hidden()
        await expect(page.locator(".msg-human .plain")).to_have_text("two steps please")
    finally:
        hold.set()


async def test_a_clarification_question_is_answered_with_its_choice_buttons(
    open_page: OpenPage, stack: Stack
) -> None:
    ask = {"question": "Which city?", "options": ["Lisbon", "Porto"]}
    stack.model.script(
        Reply(tool_calls=[ToolCall("ask_clarification", ask)]),
        Reply(text="Porto it is.", when="my answer is: Porto"),
    )
    page = await open_page()
    await send(page, "weather please")
    card = page.locator(".question")
    await expect(card.locator(".question-text")).to_have_text("Which city?")
    await expect(card.locator(".choice")).to_have_text(["Lisbon", "Porto"])
    await card.get_by_role("button", name="Porto").click()
    await expect(page.locator(".msg-ai .md").last).to_have_text("Porto it is.")
    await expect(card).to_have_count(0)
    await expect(page.locator(".msg-human .plain").last).to_have_text("Porto")
    answered = stack.model.agent_requests[-1]["messages"]
    assert any("Porto" in str(m.get("content")) and m.get("role") == "user" for m in answered)


async def test_reasoning_shows_as_a_thinking_block_and_plan_mode_shows_todos(
    open_page: OpenPage, stack: Stack
) -> None:
    todos = [
        {"content": "Find the herds", "status": "completed"},
        {"content": "Count the deer", "status": "in_progress"},
    ]
    stack.model.script(
        Reply(reasoning="Deer live in herds.", tool_calls=[ToolCall("write_todos", {"todos": todos})]),
        Reply(text="Counting now."),
    )
    page = await open_page(size=PHONE)
    await page.locator("label", has_text="Plan").click()
    await send(page, "count the deer")
    await expect(page.locator(".msg-ai .md")).to_have_text("Counting now.")
    await expect(page.locator(".thinking .thinking-text")).to_have_text("Deer live in herds.")
    await expect(page.locator(".todos li")).to_have_text(["Find the herds", "Count the deer"])
    # Each todo's state is its icon (an SVG: no font needed), ticked when done.
    await expect(page.locator(".todos li .i")).to_have_class(["i i-todo-done", "i i-todo-doing"])
    plan_mode = stack.model.agent_requests[-1]
    assert any(t["function"]["name"] == "write_todos" for t in plan_mode.get("tools", []))


async def test_a_subagent_task_shows_as_a_progress_card(open_page: OpenPage, stack: Stack) -> None:
    prompt = "Count the deer in the north herd"
    task = {"description": "count the herd", "prompt": prompt, "subagent_type": "bash"}
    stack.model.script(
        Reply(tool_calls=[ToolCall("task", task)]),
        Reply(text="Twelve deer in the north herd.", when=prompt),
        Reply(text="The subagent counted twelve.", when="Twelve deer in the north herd"),
    )
    page = await open_page()
    await page.locator("label", has_text="Subagents").click()
    await send(page, "delegate the counting")
    await expect(page.locator(".msg-ai .md").last).to_have_text("The subagent counted twelve.")
    card = page.locator(".task")
    await expect(card.locator(".task-desc")).to_have_text("count the herd")
    await expect(card.locator(".task-status")).to_have_text("Done")
    await card.locator("summary", has_text="Result").click()
    await expect(card.locator(".md")).to_have_text("Twelve deer in the north herd.")


async def test_screens_at_desktop_and_phone_width(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "ls /mnt/user-data"})]),
        Reply(text=MARKDOWN_WITH_TRAPS.split("<img")[0] + "The herd is **twelve** strong."),
    )
    page = await open_page()
    await send(page, "How big is the herd? Show your work.")
    await expect(page.locator(".msg-ai .md")).to_contain_text("twelve")
    await expect(page.locator(".thread-title").first).to_contain_text("Chat about")
    await page.screenshot(path=screenshots / "chat-desktop.png")
    await page.emulate_media(color_scheme="dark")
    await page.screenshot(path=screenshots / "chat-desktop-dark.png")
    phone = await open_page(size=PHONE, path=f"/#/t/{thread_of(page)}")
    await expect(phone.locator(".msg-ai .md")).to_contain_text("twelve")
    await phone.screenshot(path=screenshots / "chat-phone.png")
    await phone.locator("#open-sidebar").click()
    await expect(phone.locator("#sidebar")).to_have_css("transform", "none")  # slid all the way in
    await phone.screenshot(path=screenshots / "threads-phone.png")
    print(f"screenshots: {screenshots}")


async def test_the_thread_list_dates_every_chat_and_names_one_whose_first_answer_failed(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    # The model refuses the first turn outright (not something tried again): the agent names nothing.
    stack.model.script(Reply(text="model refused", status=400, when="sky green"))
    page = await open_page()
    await send(page, "Why is the sky green over the herd?")
    await expect(page.locator(".run-error")).to_be_visible()
    failed = page.locator(f'.thread[data-thread="{thread_of(page)}"]')
    # Named by how it began, in the list and the top bar, not "Untitled" (after a reload too).
    for _ in range(2):
        await expect(failed.locator(".thread-title")).to_have_text("Why is the sky green over the herd?")
        await expect(page.locator("#chat-title")).to_have_text("Why is the sky green over the herd?")
        await page.reload()
    await expect(failed.locator(".thread-title")).to_have_text("Why is the sky green over the herd?")
    await expect(page.locator(".thread-title", has_text="Untitled")).to_have_count(0)
    # Every chat says when it last changed: this one today, as a time of day.
    dates = page.locator(".thread .thread-date")
    await expect(dates).to_have_count(await page.locator(".thread").count())
    await expect(failed.locator(".thread-date")).to_have_text(re.compile(r"^\d{1,2}:\d{2}"))
    for text in await dates.all_inner_texts():
        assert text.strip(), "a date for every chat"
    await page.locator("#sidebar").screenshot(path=screenshots / "firsthour-thread-list.png")
