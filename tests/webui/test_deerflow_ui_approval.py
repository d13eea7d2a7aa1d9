"""DeerFlow's own web UI, unmodified, answering Antler's tool approvals in real Chromium: a `bash`
call that asks first shows as DeerFlow's question card; Approve runs it and the answer arrives;
a reason typed instead denies it, and the model reads the reason.

Skipped unless `ANTLER_DEERFLOW_UI` names a built DeerFlow frontend (nothing of DeerFlow is in this
repository). To build one by hand, from a checkout of https://github.com/bytedance/deer-flow:

    cp -r deer-flow/frontend /path/to/deerflow-ui && cd /path/to/deerflow-ui
    pnpm install --frozen-lockfile          # pnpm 10 (`npm install -g pnpm@10`, or corepack)
    SKIP_ENV_VALIDATION=1 NEXT_TELEMETRY_DISABLED=1 pnpm exec next build

    ANTLER_DEERFLOW_UI=/path/to/deerflow-ui pytest -p no:randomly tests/webui/test_deerflow_ui_approval.py

Leave DeerFlow's `NEXT_PUBLIC_*` variables unset: the UI then calls `/api` on its own origin and
Next.js passes those calls on to `DEER_FLOW_INTERNAL_GATEWAY_BASE_URL` as it was at build time
(DeerFlow's default: http://127.0.0.1:8001). The test serves Antler's gateway on that port
(`ANTLER_DEERFLOW_UI_GATEWAY_PORT`, default 8001; it must be free) in single-user mode (no tokens:
DeerFlow's UI with auth disabled), and runs `next start` on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, Request, expect

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.eventually import eventually
from tests.support.gateway import running_gateway
from tests.support.module_stack import module_stack
from tests.support.nats_users import SecuredServer
from tests.support.ports import free_port
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.support.schedules import running_scheduler
from tests.webui.conftest import DESKTOP, UI_TESTS, Stack

DEERFLOW_UI = os.environ.get("ANTLER_DEERFLOW_UI", "")
GATEWAY_PORT = int(os.environ.get("ANTLER_DEERFLOW_UI_GATEWAY_PORT", "8001"))

pytestmark = [
    *UI_TESTS,
    pytest.mark.timeout(300),  # the first page DeerFlow's server renders takes a while on a busy machine
    pytest.mark.skipif(
        not DEERFLOW_UI, reason="set ANTLER_DEERFLOW_UI to a built DeerFlow frontend (see the docstring)"
    ),
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Runner, sandbox broker, scheduler and the gateway where DeerFlow's build sends `/api`,
    with no tokens (single-user mode); `bash` asks first."""
    async with module_stack(
        nats_server,
        tmp_path_factory.mktemp("deerflow-ui-approvals"),
        {"ack_wait_seconds": 2.0, "max_deliver": 3},
        gateway={"host": "127.0.0.1", "port": GATEWAY_PORT, "tokens": []},
        sandbox={"provider": "local"},
        approvals={"enabled": True, "rules": [{"tools": ["bash"], "action": "ask"}]},
    ) as up:
        up.model.auto_suggestions = ["What else can you run?"]  # DeerFlow's UI asks after each answer
        url, config = nats_server.url, up.config
        async with (
            running_runner(url, config),
            running_broker(url, config),
            running_scheduler(url, config),
            running_gateway(url, config) as base,
        ):
            yield Stack(url=base, model=up.model, config=config, nats_url=url)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def deerflow_ui(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """DeerFlow's built frontend (`next start`) on a free port; its URL. Its log is in the test's
    temporary directory (`deerflow-ui*/next.log`)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "NEXT_TELEMETRY_DISABLED": "1",
        "SKIP_ENV_VALIDATION": "1",
        "DEER_FLOW_INTERNAL_GATEWAY_BASE_URL": stack.url,  # its server side's own calls
        "DEER_FLOW_AUTH_DISABLED": "1",  # Antler in single-user mode: everyone is user `default`
        "DEER_FLOW_TRUSTED_ORIGINS": url,
    }
    next_bin = Path(DEERFLOW_UI) / "node_modules" / ".bin" / "next"
    log = await asyncio.to_thread((tmp_path_factory.mktemp("deerflow-ui") / "next.log").open, "wb")
    process = await asyncio.create_subprocess_exec(
        str(next_bin),
        "start",
        "-H",
        "127.0.0.1",
        "-p",
        str(port),
        cwd=DEERFLOW_UI,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        async with httpx.AsyncClient() as http:

            async def answers() -> bool:
                if process.returncode is not None:
                    raise AssertionError(f"next start ended ({process.returncode}): see {log.name}")
                with contextlib.suppress(httpx.HTTPError):
                    return (await http.get(f"{url}/workspace/chats/new", timeout=10)).status_code == 200
                return False

            await eventually(answers, "DeerFlow's UI answers", timeout=120)
        yield url
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser, deerflow_ui: str, stack: Stack, screenshots: Path) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=DESKTOP)
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    await opened.goto(f"{deerflow_ui}/workspace/chats/new")
    yield opened
    await context.close()
    stack.model._script.clear()  # a failed test's unused replies must not answer the next test
    assert not errors, f"the page threw: {errors}"


def runs_posted(page: Page) -> list[dict[str, Any]]:
    """The bodies of the runs the page starts (`POST .../runs/stream`), as they are sent."""
    bodies: list[dict[str, Any]] = []

    def seen(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/runs/stream"):
            bodies.append(json.loads(request.post_data or "{}"))

    page.on("request", seen)
    return bodies


async def ask(page: Page, text: str) -> None:
    box = page.get_by_placeholder("How can I assist you")
    await expect(box).to_be_visible(timeout=60_000)
    await box.fill(text)
    await box.press("Enter")


def tool_results(model: FakeOpenAI) -> list[str]:
    """What the tool calls returned, as the model's latest request shows them."""
    return [str(m["content"]) for m in model.agent_requests[-1]["messages"] if m["role"] == "tool"]


async def test_approve_on_deerflows_card_runs_the_command_and_the_answer_arrives(
    page: Page, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo approved-in-deerflow"})], when="APPROVE-ME"),
        Reply(text="It printed approved-in-deerflow.", when="approved-in-deerflow"),
    )
    posted = runs_posted(page)
    await ask(page, "APPROVE-ME: run the echo")
    card = page.get_by_test_id("human-input-card")
    await expect(card).to_be_visible(timeout=60_000)
    await expect(card).to_contain_text("Approval needed: bash")
    await expect(card).to_contain_text("echo approved-in-deerflow")
    await page.screenshot(path=screenshots / "deerflow-approval-card.png")
    assert not [m for m in stack.model.agent_requests[-1]["messages"] if m["role"] == "tool"]  # not run yet
    await page.reload()  # the card is the thread's: a reopened chat shows it too
    card = page.get_by_test_id("human-input-card")
    await expect(card).to_contain_text("echo approved-in-deerflow", timeout=60_000)
    await expect(page.get_by_text("APPROVE-ME: run the echo")).to_be_visible()

    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(page.get_by_text("It printed approved-in-deerflow.")).to_be_visible(timeout=60_000)
    assert any("approved-in-deerflow" in result for result in tool_results(stack.model))
    await expect(page.get_by_test_id("human-input-card")).to_have_count(0)  # answered: the card is gone
    await page.screenshot(path=screenshots / "deerflow-approval-approved.png")
    answer = posted[-1]["input"]["messages"][-1]  # what DeerFlow's card sent: a hidden human message
    assert answer["additional_kwargs"]["hide_from_ui"] is True
    assert answer["additional_kwargs"]["human_input_response"]["option_id"] == "approve"


async def test_a_reason_typed_on_deerflows_card_denies_the_call_and_the_model_reads_it(
    page: Page, stack: Stack, screenshots: Path
) -> None:
    stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /mnt/user-data/outputs"})], when="DENY-ME"),
        Reply(text="Understood, I left the outputs alone.", when="denied"),
    )
    await ask(page, "DENY-ME: clean up the outputs")
    card = page.get_by_test_id("human-input-card")
    await expect(card).to_contain_text("rm -rf /mnt/user-data/outputs", timeout=60_000)
    await card.get_by_role("textbox").fill("not on a Friday")
    await page.screenshot(path=screenshots / "deerflow-approval-deny.png")
    await card.get_by_role("textbox").press("Enter")

    await expect(page.get_by_text("Understood, I left the outputs alone.")).to_be_visible(timeout=60_000)
    [result] = tool_results(stack.model)
    assert "this call was not run: the user denied this call: not on a Friday" in result
    await expect(page.get_by_test_id("human-input-card")).to_have_count(0)
