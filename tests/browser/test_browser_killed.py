"""A browser process SIGKILLed in the middle of a run: the agent's next browser action is told the
page is gone, navigating again opens it in another browser process, and the run ends well."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bus import Bus
from bus.messages.browser import BrowserReply, BrowserRequest
from bus.service import ServiceError, call
from tests.browser.conftest import ask, tool_results
from tests.conftest import finished
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_pages import WebPages
from tests.support.runner import AntlerCli, submit_and_collect

pytestmark = pytest.mark.asyncio

LOST = "so the page is gone. Open it again with browser_navigate."


async def until_serving(bus: Bus, proc: asyncio.subprocess.Process) -> None:
    """Until a browser process answers `browser.act` (a thread with no page: not_found)."""
    async with asyncio.timeout(60):
        while True:
            assert proc.returncode is None, "the browser process exited while starting"
            try:
                await call(bus, "browser", "act", BrowserRequest(thread_id="t-probe", action="text"),
                           BrowserReply, timeout=10)  # fmt: skip
            except ServiceError as exc:
                if exc.code == "not_found":
                    return
                if exc.code != "unavailable":
                    raise
            await asyncio.sleep(0.1)  # not subscribed yet; asked again


async def test_a_browser_killed_mid_run_loses_the_page_and_navigating_again_works(
    bus: Bus,
    fake_model: FakeOpenAI,
    site: WebPages,
    browser_config: dict[str, Any],
    runner: None,
    antler_cli: AntlerCli,
) -> None:
    home = f"http://127.0.0.1:{site.port}/"
    gate = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": home})]),
        Reply(tool_calls=[ToolCall("browser_get_text", {})], when="Title: Parcel tracker", hold=gate),
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": home})], when=LOST),
        Reply(tool_calls=[ToolCall("browser_get_text", {})], when="Title: Parcel tracker"),
        Reply(text="The tracker is back.", when="Track a parcel"),
    )
    doomed = await antler_cli("run", "browser")
    spare: asyncio.subprocess.Process | None = None
    try:
        await until_serving(bus, doomed)
        run = asyncio.create_task(submit_and_collect(bus, ask("t-killed", "Open the tracker"), timeout=180))
        await fake_model.wait_until(lambda: fake_model.holding == 1, timeout=120)  # the page is open
        doomed.kill()  # SIGKILL, while the model decides its next browser action
        await finished(doomed)
        spare = await antler_cli("run", "browser")
        await until_serving(bus, spare)
        gate.set()
        events = await run
    finally:
        gate.set()
        for proc in (doomed, spare):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                await finished(proc)

    assert events[-1].data["status"] == "success", events[-1]
    opened, lost, reopened, text = tool_results(fake_model)
    assert "Title: Parcel tracker" in opened
    assert lost.endswith(LOST), lost
    assert "Title: Parcel tracker" in reopened, "navigating again opened the page in the other process"
    assert "Track a parcel" in text
