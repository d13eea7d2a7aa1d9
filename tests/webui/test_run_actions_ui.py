"""The actions under answers and messages in the web UI: regenerate, edit and resend, branch, thumbs
up; and subagent cards with their steps, and tool steps, still there after a reload (mid-run, and
after the run's live event log is gone)."""

from __future__ import annotations

import asyncio
import unicodedata
from pathlib import Path

from playwright.async_api import expect

from bus import Bus
from bus.chat_partitions import chat_partitions
from tests.fakes.openai_server import Reply, ToolCall
from tests.webui.conftest import UI_TESTS, OpenPage, Stack
from tests.webui.pages import send

pytestmark = UI_TESTS


async def test_regenerate_thumbs_up_edit_and_branch(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(Reply(text="Paris, first try.", when="France"))
    page = await open_page()
    await send(page, "capital of France?", enter=True)
    answers = page.locator(".msg-ai > .md")
    await expect(answers).to_have_text(["Paris, first try."])

    stack.model.script(Reply(text="Paris, second try.", when="France"))
    await page.get_by_role("button", name="Regenerate this answer").click()
    await expect(answers).to_have_text(["Paris, second try."])
    await expect(page.locator(".msg-human .plain")).to_have_text(["capital of France?"])

    # rating an answer redraws its buttons, not the answer a reader may be selecting text in (marked
    # once the run has ended and its answer is the thread's: the buttons come then)
    good = page.get_by_role("button", name="Good answer")
    await expect(good).to_be_visible()
    await page.evaluate("document.querySelector('.msg-ai > .md').dataset.seen = 'yes'")
    await good.click()
    await expect(good).to_have_attribute("aria-pressed", "true")
    await expect(page.locator(".msg-ai > .md")).to_have_attribute("data-seen", "yes")
    await page.reload()
    await expect(answers).to_have_text(["Paris, second try."])  # the regenerated answer is the thread's
    await expect(page.get_by_role("button", name="Good answer")).to_have_attribute("aria-pressed", "true")

    stack.model.script(Reply(text="Rome.", when="Italy"))
    await page.get_by_role("button", name="Edit and resend").click()
    await page.get_by_label("Edited message").fill("capital of Italy?")
    await page.get_by_role("button", name="Send edited").click()
    await expect(answers).to_have_text(["Rome."])
    await expect(page.locator(".msg-human .plain")).to_have_text(["capital of Italy?"])
    source = page.url

    await page.get_by_role("button", name="Branch from here").click()
    await expect(page).not_to_have_url(source)
    await expect(page.locator(".msg-human .plain")).to_have_text(["capital of Italy?"])
    await expect(answers).to_have_text(["Rome."])
    await expect(page.locator("#thread-list .thread.active")).to_contain_text("(branch)")


async def test_subagent_cards_and_tool_steps_survive_reloads_and_the_live_logs_expiry(
    open_page: OpenPage, stack: Stack
) -> None:
    prompt = "Count the deer in the south herd"
    task = {"description": "count the south herd", "prompt": prompt, "subagent_type": "general-purpose"}
    counted = asyncio.Event()
    stack.model.script(
        Reply(
            tool_calls=[
                ToolCall("task", task),
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/herd.md", "content": "9 deer\n"}),
            ]
        ),
        Reply(text="Nine deer.", when=prompt, hold=counted),
        Reply(text="The south herd has nine deer.", when="Wrote"),
    )
    try:
        page = await open_page()
        await page.locator("label", has_text="Subagents").click()
        await send(page, "count the south herd")
        card = page.locator(".task")
        await expect(card.locator(".task-desc")).to_have_text("count the south herd")
        await page.reload()  # mid-run: the card comes back from the run's log
        await expect(card.locator(".task-status")).to_have_text("Working")
        counted.set()
        await expect(page.locator(".msg-ai > .md")).to_have_text(["The south herd has nine deer."])
        await expect(card.locator(".task-status")).to_have_text("Done")
    finally:
        counted.set()

    # The live log expires; the card, its steps and the tool step come from the run's journal and state.
    assert stack.admin is not None
    bus = await Bus.connect(stack.nats_url, stack.admin, name="test")
    try:
        for k in range(await chat_partitions(bus)):
            await bus.js.purge_stream(bus.subjects.run_events_partition_stream(k))
    finally:
        await bus.close()
    await page.reload()
    await expect(page.locator(".msg-ai > .md")).to_have_text(["The south herd has nine deer."])
    await expect(card.locator(".task-status")).to_have_text("Done")
    await card.locator(".task-steps summary").click()
    await expect(card.locator(".task-step")).to_have_text(["Nine deer."])
    await expect(page.locator('.step[data-tool="write_file"] .step-arg')).to_have_text(
        "/mnt/user-data/outputs/herd.md"
    )


async def test_the_icons_are_drawn_not_taken_from_a_font(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    """A machine without an emoji font drew the branch and thumbs as empty boxes: every icon is an
    SVG of its own, and no button's text is a pictograph."""
    stack.model.script(Reply(text="Icons, drawn.", when="ICON-MARK"))
    page = await open_page()
    await send(page, "ICON-MARK show me", enter=True)
    # Each is drawn at a size one can see (the foot is redrawn once the run is known: wait for it).
    await page.wait_for_function(
        """() => ["Regenerate this answer", "Branch from here", "Good answer", "Bad answer"].every((name) => {
            const drawn = document.querySelector(`.msg-ai .msg-foot button[aria-label="${name}"] svg`);
            const box = drawn && drawn.getBoundingClientRect();
            return box && box.width >= 12 && box.height >= 12;
        })""",
        timeout=15_000,
    )
    await expect(page.get_by_role("button", name="Edit and resend").locator("svg")).to_be_visible()
    labels = await page.evaluate("() => [...document.querySelectorAll('button')].map((b) => b.textContent)")
    glyphs = {c for label in labels for c in label if unicodedata.category(c) == "So"}
    assert not glyphs, f"buttons still show glyphs a font must have: {glyphs}"
    await page.locator(".msg-ai").last.screenshot(path=screenshots / "firsthour-answer-icons.png")
    await page.screenshot(path=screenshots / "firsthour-icons-page.png")
