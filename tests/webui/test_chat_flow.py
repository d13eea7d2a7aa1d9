"""The chat's flow in the web UI: typing while an answer streams, failed steps, stopping."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS


async def test_a_message_typed_while_an_answer_streams_is_queued_then_sent(
    open_page: OpenPage, stack: Stack
) -> None:
    hold = asyncio.Event()
    stack.model.script(Reply(text="First answer.", hold=hold), Reply(text="Second answer."))
    try:
        page = await open_page()
        await send(page, "first question", enter=True)
        await expect(page.locator("#stop")).to_be_visible()
        # typed and sent with Enter while the first answer is being written: kept, shown as queued
        await send(page, "second question", enter=True)
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
        await send(page, "a question", enter=True)
        await expect(page.locator("#stop")).to_be_visible()
        await send(page, "on second thought", enter=True)
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
    await send(page, "read the shadow file")
    await expect(page.locator(".msg-ai .md")).to_have_text("I may not read that.")
    step = page.locator(".step[data-tool=read_file]")
    await expect(step).to_have_class("step step-error")
    await expect(step.locator(".step-icon .i")).to_have_class("i i-failed")
    # and so it stays after a reload (the thread's stored history says so too)
    await page.reload()
    await expect(page.locator(".step[data-tool=read_file]")).to_have_class("step step-error")


async def follows(page, first: str, second: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the last element matching `second` comes after the first matching `first`."""
    return bool(
        await page.evaluate(
            "([a, b]) => !!(document.querySelector(a).compareDocumentPosition("
            "[...document.querySelectorAll(b)].at(-1)) & Node.DOCUMENT_POSITION_FOLLOWING)",
            [first, second],
        )
    )


async def test_stop_keeps_the_partial_answer_with_a_marker_also_after_a_reload(
    open_page: OpenPage, stack: Stack
) -> None:
    words = " ".join(f"word{n}" for n in range(400))
    stack.model.script(Reply(text=f"Partial {words}", chunk_delay=0.05))
    page = await open_page()
    await send(page, "write a lot")
    await expect(page.locator(".msg-ai.streaming")).to_contain_text("word3")
    await page.locator("#stop").click()
    await expect(page.locator("#stop")).to_be_hidden()
    # no error box: a quiet marker under what was written
    await expect(page.locator(".run-error")).to_have_count(0)
    await expect(page.locator(".run-note")).to_have_text("Stopped before the answer was finished.")
    await expect(page.locator(".msg-ai .md")).to_contain_text("Partial word0")
    await page.reload()
    await expect(page.locator(".msg-human .plain")).to_have_text("write a lot")
    await expect(page.locator(".msg-ai .md")).to_contain_text("Partial word0")
    await expect(page.locator(".run-note")).to_have_text("Stopped before the answer was finished.")
    await expect(page.locator(".run-error")).to_have_count(0)
    # the conversation goes on: the stopped answer stays under its question, above the next turn
    stack.model.script(Reply(text="A short one."))
    await send(page, "shorter please")
    await expect(page.locator(".msg-ai > .md").last).to_have_text("A short one.")
    await expect(page.locator("#stop")).to_be_hidden()  # the run is over (no "Working" dots below)
    order = await page.locator("#messages > .msg").evaluate_all(
        "nodes => nodes.map(n => n.classList.contains('msg-human') ? 'Q' : 'A')"
    )
    assert order == ["Q", "A", "Q", "A"]
    await expect(page.locator(".msg-ai > .md").first).to_contain_text("Partial word0")
    await expect(page.locator(".run-note")).to_have_count(0)


async def test_a_model_down_error_names_the_picked_model_and_stays_after_a_reload(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(*[Reply(text="upstream overloaded", status=503)] * 5)  # every try (model_calls)
    page = await open_page()
    await send(page, "are you there")
    error = page.locator(".run-error")
    await expect(error).to_contain_text("the model 'Fake model' could not be reached")
    await expect(error).not_to_contain_text("fake-1")
    await page.reload()
    await expect(page.locator(".msg-human .plain")).to_have_text("are you there")
    await expect(page.locator(".run-error")).to_contain_text("the model 'Fake model' could not be reached")


async def test_plan_and_subagent_cards_sit_where_they_happened_with_the_latest_plan(
    open_page: OpenPage, stack: Stack
) -> None:
    first = [{"content": "Find the herd", "status": "in_progress"}, {"content": "Count", "status": "pending"}]
    later = [
        {"content": "Find the herd", "status": "completed"},
        {"content": "Count", "status": "in_progress"},
    ]
    prompt = "Count the deer in the north herd"
    task = {"description": "count the herd", "prompt": prompt, "subagent_type": "bash"}
    stack.model.script(
        Reply(tool_calls=[ToolCall("write_todos", {"todos": first})]),
        Reply(tool_calls=[ToolCall("task", task)]),
        Reply(text="Twelve deer.", when=prompt),
        Reply(tool_calls=[ToolCall("write_todos", {"todos": later})], when="Twelve deer"),
        Reply(text="The herd has twelve deer."),
        Reply(text="You are welcome."),
    )
    page = await open_page()
    await page.locator("label", has_text="Plan").click()
    await page.locator("label", has_text="Subagents").click()
    await send(page, "count the herd")
    await expect(page.locator(".msg-ai > .md")).to_have_text(["The herd has twelve deer."])
    await send(page, "thanks")
    await expect(page.locator(".msg-ai > .md")).to_have_text(
        ["The herd has twelve deer.", "You are welcome."]
    )
    for _ in range(2):  # live, then after a reload
        # one plan card, with the latest states, and the task card, both in the first answer's flow
        await expect(page.locator(".todos")).to_have_count(1)
        await expect(page.locator(".todos li")).to_have_text(["Find the herd", "Count"])
        await expect(page.locator(".todos li .i")).to_have_class(["i i-todo-done", "i i-todo-doing"])
        await expect(page.locator(".task .task-status")).to_have_text("Done")
        assert await follows(page, ".task", ".todos")
        # ...above the second question, not piled up under the last message
        assert await follows(page, ".todos", ".msg-human")
        assert await follows(page, ".todos", ".msg-ai > .md")
        await page.reload()
        await expect(page.locator(".msg-ai > .md")).to_have_count(2)


async def test_a_stopped_answer_keeps_its_subagent_card_after_a_reload(
    open_page: OpenPage, stack: Stack
) -> None:
    prompt = "Count the deer in the south herd"
    task = {"description": "count the south herd", "prompt": prompt, "subagent_type": "bash"}
    hold = asyncio.Event()  # the subagent is still counting when Stop is pressed
    stack.model.script(
        Reply(tool_calls=[ToolCall("task", task)]), Reply(text="Nine deer.", when=prompt, hold=hold)
    )
    try:
        page = await open_page()
        await page.locator("label", has_text="Subagents").click()
        await send(page, "delegate the south count")
        card = page.locator(".task")
        await expect(card.locator(".task-desc")).to_have_text("count the south herd")
        await page.locator("#stop").click()
        await expect(page.locator(".run-note")).to_have_text("Stopped before the answer was finished.")
        await page.reload()
        await expect(page.locator(".msg-human .plain")).to_have_text("delegate the south count")
        await expect(card.locator(".task-desc")).to_have_text("count the south herd")
        await expect(card.locator(".task-status")).not_to_have_text("Done")
        await expect(page.locator(".run-note")).to_have_text("Stopped before the answer was finished.")
        await expect(page.locator(".run-error")).to_have_count(0)
    finally:
        hold.set()


async def test_a_rate_limited_model_shows_retrying_until_it_answers(
    open_page: OpenPage, stack: Stack
) -> None:
    hold = asyncio.Event()
    stack.model.refuse(1, retry_after="1")
    stack.model.script(Reply(text="Back again.", hold=hold))
    try:
        page = await open_page()
        await send(page, "are you busy")
        notice = page.locator(".model-retry")
        await expect(notice).to_have_text("The model is busy; retrying (2/5) in 1s…")
        hold.set()
        await expect(page.locator(".msg-ai .md")).to_have_text(["Back again."])
        await expect(notice).to_have_count(0)
        await expect(page.locator(".run-error")).to_have_count(0)
    finally:
        hold.set()
