"""`antler up` with `browser.enabled: true`, as a user turns it on: it starts the browser in a
process of its own, a chat turn through the HTTP API has the scripted model open a page served on
loopback (allowed by config) and answer from its text, and the page's screenshot is among the
thread's outputs (served as an artifact). At the end Ctrl-C stops everything cleanly and its
server refused none of its components."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_pages import WebPages
from tests.support.antler_up import UpStack, up_in
from tests.support.browser import CHROMIUM

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("antler-up-e2e"),
    pytest.mark.timeout(300),
]


@dataclass
class Stack(UpStack):
    site: WebPages


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    workdir = tmp_path_factory.mktemp("up-browser")
    async with FakeOpenAI(api_key="sk-test") as model, WebPages() as site:
        config = {
            "models": [{"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}],
            "gateway": {"port": 0},
            "runner": {"processes": 2},
            "browser": {"enabled": True, "chromium": CHROMIUM, "allow_private_networks": True},
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        async with up_in(workdir) as up:
            yield Stack(up, model, await up.gateway_url(), site)


async def test_a_chat_turn_browses_a_page_and_answers_from_it_with_the_screenshot_in_outputs(
    stack: Stack,
) -> None:
    page = f"http://127.0.0.1:{stack.site.port}/track?number=UP-77"
    stack.model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": page})], when="UP-BROWSE"),
        Reply(tool_calls=[ToolCall("browser_get_text", {})], when="Title: Parcel UP-77"),
        Reply(text="Parcel UP-77 is out for delivery in Lyon, says the tracker.", when="out for delivery"),
    )
    async with httpx.AsyncClient(base_url=stack.gateway, timeout=120) as http:
        thread = (await http.post("/api/threads", json={})).json()["thread_id"]
        answer = await http.post(
            f"/api/threads/{thread}/runs/wait",
            json={
                "assistant_id": "lead_agent",
                "input": {"messages": [{"role": "user", "content": "UP-BROWSE where is parcel UP-77?"}]},
            },
        )
        assert answer.status_code == 200, answer.text
        messages = answer.json()["messages"]
        assert messages[-1]["content"] == "Parcel UP-77 is out for delivery in Lyon, says the tracker."
        tools = [m for m in messages if m["type"] == "tool"]
        assert [m["name"] for m in tools] == ["browser_navigate", "browser_get_text"]
        assert "Parcel UP-77 is out for delivery in Lyon." in tools[1]["content"], "the page's own text"
        view = tools[0]["additional_kwargs"]["browser_view"]
        assert view["screenshot"] == "/mnt/user-data/outputs/.browser/latest.jpg"
        assert view["title"] == "Parcel UP-77"
        shot = await http.get(f"/api/threads/{thread}/artifacts{view['screenshot']}")
        assert shot.status_code == 200, shot.text
        assert shot.content.startswith(b"\xff\xd8"), "a JPEG of the page"
    browsers = [p for p in stack.up.children() if "run browser" in p.cmdline]
    assert browsers, "antler up runs the browser in a process of its own"
