"""Tool approvals in the web UI (real Chromium): a `bash` call the approvals config asks about shows a
card under the conversation naming the command, also after a reload; its buttons answer it as
`/approve` and `/deny` do, and the answer streams on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Locator, Page, expect

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, echo_and_answer
from tests.support.nats_users import SecuredServer
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.support.schedules import running_scheduler
from tests.webui.conftest import PHONE, TOKENS, UI_TESTS, OpenPage, Stack, module_ui_stack
from tests.webui.pages import send, thread_of

pytestmark = UI_TESTS


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Runner, sandbox broker, scheduler (approvals' expiry) and gateway; `bash` asks first."""
    async with module_ui_stack(
        nats_server,
        tmp_path_factory.mktemp("webui-approvals"),
        (running_runner, running_broker, running_scheduler),
        approvals={"enabled": True, "rules": [{"tools": ["bash"], "action": "ask"}]},
    ) as up:
        up.model.auto_suggestions = ["What else can you run?"]  # outside the script
        yield up


def card(page: Page) -> Locator:
    return page.get_by_role("group", name="Approval needed: bash")


async def asked(open_page: OpenPage, text: str) -> tuple[Page, Locator]:
    """A fresh page that sent `text`, once it shows the approval card."""
    page = await open_page()
    await send(page, text)
    asking = card(page)
    await expect(asking).to_be_visible()
    return page, asking


def tool_results(model: FakeOpenAI) -> list[str]:
    """What the tool calls returned, as the model's latest request shows them."""
    return [str(m["content"]) for m in model.agent_requests[-1]["messages"] if m["role"] == "tool"]


async def test_approve_runs_the_command_and_the_answer_streams_on(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    written = asyncio.Event()
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo approved-in-chromium"})], when="APPROVE-ME"),
        Reply(text="It printed approved-in-chromium.", when="approved-in-chromium", hold=written),
    )
    page = await open_page()
    await send(page, "APPROVE-ME: run the echo")
    asking = card(page)
    await expect(asking.locator(".approval-what")).to_have_text("echo approved-in-chromium")
    await expect(asking).to_contain_text("The agent wants to use bash to run:")
    step = page.locator(".step[data-tool='bash']")
    await expect(step.locator(".step-wait")).to_have_text("waits for your approval")
    await page.screenshot(path=screenshots / "approval-card.png")
    assert not [m for m in stack.model.agent_requests[-1]["messages"] if m["role"] == "tool"]  # not run yet

    await asking.get_by_role("button", name="Approve", exact=True).click()
    answered = page.get_by_role("status", name="Approval needed: bash")
    await expect(answered).to_have_text("Approved: bash runs now.")
    await stack.model.wait_until(lambda: stack.model.holding == 1)  # the model reads the result
    assert any("approved-in-chromium" in result for result in tool_results(stack.model))
    written.set()
    await expect(page.locator(".msg-ai .md")).to_have_text(["It printed approved-in-chromium."])
    await expect(page.locator(".approval")).to_have_count(0)
    await expect(step).to_have_class("step step-done")  # the command ran, and the step says so


async def test_deny_with_a_reason_at_phone_width_and_the_model_reads_it(
    open_page: OpenPage, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /mnt/user-data/outputs"})], when="DENY-ME"),
        Reply(text="Understood, I left the outputs alone.", when="denied"),
    )
    page = await open_page(size=PHONE)
    await send(page, "DENY-ME: clean up the outputs")
    asking = card(page)
    await expect(asking.locator(".approval-what")).to_have_text("rm -rf /mnt/user-data/outputs")
    for name in ("Approve", "Always for this thread", "Deny"):
        box = await asking.get_by_role("button", name=name, exact=True).bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= PHONE["width"], f"{name} is off the phone's screen"
    await asking.get_by_label("Reason for denying (optional)").fill("not on a Friday")
    await page.screenshot(path=screenshots / "approval-card-phone.png")
    await asking.get_by_role("button", name="Deny", exact=True).click()

    await expect(page.locator(".msg-ai .md")).to_have_text(["Understood, I left the outputs alone."])
    await expect(page.locator(".approval")).to_have_count(0)
    [result] = tool_results(stack.model)
    assert "this call was not run: the user denied this call: not on a Friday" in result
    await expect(page.locator(".step[data-tool='bash']")).to_have_class("step step-error")


async def test_the_card_is_there_after_a_reload_and_always_lets_the_tool_run_unasked_in_the_thread(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo first-of-two"})], when="ALWAYS-ME"),
        Reply(text="The first ran.", when="first-of-two"),
        Reply(tool_calls=[ToolCall("bash", {"command": "echo second-of-two"})], when="AGAIN"),
        Reply(text="The second ran too.", when="second-of-two"),
    )
    page = await open_page()
    await send(page, "ALWAYS-ME: run the first")
    await expect(card(page).locator(".approval-what")).to_have_text("echo first-of-two")
    await page.reload()
    asking = card(page)
    await expect(asking.locator(".approval-what")).to_have_text("echo first-of-two")
    await expect(page.locator(".run-note")).to_have_count(0)  # waiting is not "stopped"

    await asking.get_by_role("button", name="Always for this thread").click()
    answers = page.locator(".msg-ai .md")
    await expect(answers).to_have_text(["The first ran."])
    await expect(page.locator(".approval")).to_have_count(0)

    await send(page, "AGAIN: and the second")
    await expect(answers).to_have_text(["The first ran.", "The second ran too."])
    await expect(page.locator(".approval")).to_have_count(0)
    results = tool_results(stack.model)
    assert any("second-of-two" in result for result in results)  # ran without asking


async def test_approve_typed_in_the_box_answers_the_card_too(open_page: OpenPage, stack: Stack) -> None:
    stack.model.script(*echo_and_answer("typed-approval", "Typed approval worked.", when="TYPED"))
    page, asking = await asked(open_page, "TYPED: run it")
    approval_id = await asking.get_attribute("data-approval")
    assert approval_id
    await send(page, f"/approve {approval_id}")
    await expect(page.locator(".msg-ai .md")).to_have_text(["Typed approval worked."])
    await expect(page.locator(".msg-note").last).to_contain_text(f"Approved {approval_id}")
    await expect(page.locator(".approval")).to_have_count(0)


async def test_a_card_answered_elsewhere_meanwhile_says_so_and_goes(
    open_page: OpenPage, stack: Stack
) -> None:
    stack.model.script(
        *echo_and_answer("answered-elsewhere", "Approved from elsewhere, it ran.", when="ELSEWHERE")
    )
    page, asking = await asked(open_page, "ELSEWHERE: run it")
    async with httpx.AsyncClient(base_url=f"{stack.url}/api", headers={"x-api-key": TOKENS["ana"]}) as http:
        other_tab = await http.post(
            f"/threads/{thread_of(page)}/runs/wait",
            json={"assistant_id": "lead_agent", "command": {"resume": {"decision": "approve"}}},
            timeout=30,
        )
        assert other_tab.status_code == 200, other_tab.text

    await asking.get_by_role("button", name="Deny", exact=True).click()  # the page still shows it
    await expect(page.locator("#toast")).to_contain_text("That request was answered already")
    await expect(page.locator(".approval")).to_have_count(0)
    await expect(page.locator(".msg-ai .md")).to_have_text(["Approved from elsewhere, it ran."])
    await expect(page.locator(".run-error")).to_have_count(0)
