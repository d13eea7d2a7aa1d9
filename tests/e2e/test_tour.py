"""The capability tour: every capability a user reaches, on `antler up` as a user runs it.

One `antler up` for the module, a child process on its defaults (bwrap sandbox, one NATS user
per component, two runner processes; only the model, the gateway's port, a short memory
debounce and the Telegram bot are configured), reached the four ways users reach it: the
LangGraph SDK against the gateway, `antler send`, a raw nats-py script with the admin's saved
credentials, and the Telegram adapter (inside `antler up`, against the fake Bot API).

At the end the embedded nats-server's log must hold no permission refusal (a capability whose
component lacks a right fails on defaults) and Ctrl-C must stop everything cleanly.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
import pytest_asyncio
import yaml
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from sandbox.providers import bwrap_works
from tests.conftest import REPO, finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.fakes.telegram_server import FakeTelegram
from tests.support.antler_up import AntlerUp

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("tour")]

UPLOADS = "/mnt/user-data/uploads"
OUTPUTS = "/mnt/user-data/outputs"
WORK = "/mnt/user-data/workspace/tour"
# A 1x1 PNG, for view_image.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)


@dataclass
class Tour:
    workdir: Path
    up: AntlerUp
    model: FakeOpenAI
    memory_model: FakeOpenAI
    telegram: FakeTelegram
    gateway: str
    sdk: LangGraphClient
    http: httpx.AsyncClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tour(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Tour]:
    if not bwrap_works():
        pytest.fail("the tour runs on defaults, whose sandbox is bwrap: install bubblewrap", pytrace=False)
    workdir = tmp_path_factory.mktemp("tour")
    async with (
        FakeOpenAI(api_key="sk-test") as model,
        FakeOpenAI(api_key="sk-test") as memory_model,
        FakeTelegram() as telegram,
    ):
        config = {
            "models": [
                {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url,
                 "max_retries": 0, "supports_vision": True},
                # The memory updater's own model, so its requests never take the agent's script.
                {"name": "memo", "model": "memo-1", "api_key": "sk-test",
                 "base_url": memory_model.base_url, "max_retries": 0},
            ],
            "gateway": {"port": 0},  # the default, 2026, may be taken on a shared machine
            "runner": {"processes": 2},  # the default on two cores, said outright
            "memory": {"debounce_seconds": 0.5, "model_name": "memo"},
            "channels": {"telegram": {"enabled": True, "bot_token": telegram.token,
                                      "base_url": telegram.base_url}},
        }  # fmt: skip
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        notes = {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", "tests.fakes.mcp_servers", "stdio"],
            "env": {"PYTHONPATH": str(REPO)},
        }
        (workdir / "extensions_config.json").write_text(json.dumps({"mcpServers": {"notes": notes}}))
        up = AntlerUp(workdir)
        try:
            await up.start(runners=2)
            gateway = await up.gateway_url()
            sdk = get_client(url=f"{gateway}/api", timeout=120)
            try:
                async with httpx.AsyncClient(base_url=f"{gateway}/api", timeout=60) as http:
                    yield Tour(workdir, up, model, memory_model, telegram, gateway, sdk, http)
            finally:
                await sdk.http.client.aclose()
            code = await up.stop(90)
            assert code == 0, f"antler up did not stop cleanly on SIGINT ({code}):\n{up.tail()}"
        finally:
            await up.kill_all()
        assert (up.data_dir / "nats-server.log").exists(), "where antler up keeps the server's log"
        refused = up.violations()
        assert not refused, "nats-server refused components on defaults:\n  " + "\n  ".join(refused)


@pytest.fixture(autouse=True)
def clean_script(tour: Tour) -> Any:
    """A failed step's unused replies must not answer the next test's requests."""
    yield
    tour.model._script.clear()


async def ask(tour: Tour, text: str, thread_id: str | None = None, **configurable: Any) -> dict[str, Any]:
    """One run through the LangGraph SDK, waited for: the thread's final values."""
    if thread_id is None:
        thread_id = (await tour.sdk.threads.create())["thread_id"]
    result = await tour.sdk.runs.wait(
        thread_id,
        "lead_agent",
        input={"messages": [{"role": "user", "content": text}]},
        config={"configurable": configurable},
    )
    assert isinstance(result, dict), result
    return result


def text(content: Any) -> str:
    """A message's content as text (MCP tools answer with a list of content blocks)."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def tool_results(values: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: text(m["content"]) for m in values["messages"] if m["type"] == "tool"}


def request_with(model: FakeOpenAI, marker: str) -> dict[str, Any]:
    """The agent's model request whose last user message holds `marker`."""
    for request in model.agent_requests:
        users = [m for m in request["messages"] if m["role"] == "user"]
        if users and marker in str(users[-1]["content"]):
            return request
    raise AssertionError(f"no model request for {marker!r}")


def system_prompt(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "system")


async def eventually(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0) -> Any:
    """`check()`'s first truthy answer; a generous deadline bounds a failure, it times nothing."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.1)


async def test_each_sandbox_tool_an_upload_and_an_artifact_through_the_sdk(tour: Tour) -> None:
    thread = (await tour.sdk.threads.create())["thread_id"]
    uploaded = await tour.http.post(
        f"/threads/{thread}/uploads",
        files=[
            ("files", ("brief.txt", b"UPLOAD-CONTENT: the herd is twelve\n")),
            ("files", ("dot.png", PNG)),
        ],
    )
    assert uploaded.status_code == 200, uploaded.text
    report = f"{OUTPUTS}/report.csv"
    tour.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo BASH-$((6*7))"})], when="TOUR-TOOLS"),
        Reply(tool_calls=[ToolCall("write_file", {"path": f"{WORK}/notes.txt", "content": "alpha line\n"})]),
        Reply(
            tool_calls=[
                ToolCall("str_replace", {"path": f"{WORK}/notes.txt", "old_str": "alpha", "new_str": "omega"})
            ]
        ),
        Reply(tool_calls=[ToolCall("ls", {"path": WORK})]),
        Reply(tool_calls=[ToolCall("glob", {"pattern": "**/*.txt", "path": WORK})]),
        Reply(tool_calls=[ToolCall("grep", {"pattern": "omega", "path": WORK})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": f"{UPLOADS}/brief.txt"})]),
        Reply(tool_calls=[ToolCall("view_image", {"image_path": f"{UPLOADS}/dot.png"})]),
        Reply(tool_calls=[ToolCall("write_file", {"path": report, "content": "deer,count\nnorth,12\n"})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [report]})]),
        Reply(text="TOOLS-DONE"),
    )
    await tour.up.wait_for_line("sandbox broker serving with the bwrap provider", stream="err")
    values = await ask(tour, "TOUR-TOOLS use every tool", thread)
    assert values["messages"][-1]["content"] == "TOOLS-DONE"
    results = tool_results(values)
    assert "BASH-42" in results["bash"]
    assert results["str_replace"] == f"Replaced 1 occurrence(s) in {WORK}/notes.txt"
    assert "notes.txt" in results["ls"]
    assert f"{WORK}/notes.txt" in results["glob"]
    assert "omega line" in results["grep"]
    assert results["read_file"] == "UPLOAD-CONTENT: the herd is twelve\n"
    assert results["view_image"].startswith(f"Loaded {UPLOADS}/dot.png")
    assert results["write_file"].startswith("Wrote ")
    assert results["present_files"] == "Presented 1 file(s) to the user."
    assert report in values.get("artifacts", [])

    downloaded = await tour.http.get(f"/threads/{thread}/artifacts{report}", params={"download": True})
    assert downloaded.status_code == 200, downloaded.text
    assert downloaded.content == b"deer,count\nnorth,12\n"

    await tour.sdk.threads.delete(thread)  # the runner drops it, the gateway its files
    assert (await tour.http.get(f"/threads/{thread}/artifacts{report}")).status_code == 404
    assert (await tour.http.get(f"/threads/{thread}")).status_code == 404


async def test_telegram_a_document_in_an_artifact_out_and_a_malformed_update_dead_lettered(
    tour: Tour,
) -> None:
    telegram = tour.telegram
    await telegram.wait_for("getMe", timeout=60)
    report = f"{OUTPUTS}/tg-report.csv"
    tour.model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": f"{UPLOADS}/herd.txt"})], when="TOUR-TG"),
        Reply(tool_calls=[ToolCall("write_file", {"path": report, "content": "herd,size\nnorth,12\n"})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [report]})]),
        Reply(text="TG-DONE: the north herd has 12."),
        Reply(text="TG-STILL-HERE", when="TOUR-TG-AFTER"),
    )
    telegram.send_user_document("herd.txt", b"TG-DOC: north herd, 12 deer\n", caption="TOUR-TG count it")
    documents = await telegram.wait_for("sendDocument", timeout=90)
    assert documents[0]["document"] == b"herd,size\nnorth,12\n"
    assert documents[0]["document_name"] == "tg-report.csv"
    tool_messages = [
        unfenced(text(m["content"]))
        for r in tour.model.agent_requests
        for m in r["messages"]
        if m["role"] == "tool"
    ]
    assert "TG-DOC: north herd, 12 deer\n" in tool_messages, "the agent read the document sent in Telegram"

    # An update python-telegram-bot cannot parse (no date, no chat), then a good one.
    telegram.push({"update_id": 9_000_001, "message": {"message_id": 1, "text": "no chat"}})
    telegram.send_user_message("TOUR-TG-AFTER are you there?")

    def said(words: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return any(
                words in str(p.get("text"))
                for m, p in telegram.calls
                if m in ("sendMessage", "editMessageText")
            )

        return check

    await eventually(said("TG-DONE: the north herd has 12."), "the Telegram answer", 90)
    await eventually(said("TG-STILL-HERE"), "an answer after the malformed update", 90)
    code, out, err = await finished(await run_antler("dlq", "list", cwd=tour.workdir), 60)
    assert code == 0, err
    assert "telegram-updates" in out, out  # who gave up on it
    assert "antler.chat.in.telegram" in out, out  # where it was headed
    assert "unreadable Telegram update" in out, out  # why


async def test_antler_send_and_a_raw_nats_script(tour: Tour) -> None:
    tour.model.script(Reply(text="SEND-OK", when="TOUR-SEND"), Reply(text="RAW-OK", when="TOUR-RAW"))
    elsewhere = tour.workdir.parent  # the data dir is found next to the config it is given
    config = str(tour.workdir / "config.yaml")
    code, out, err = await finished(
        await run_antler("send", "-c", config, "--chat", "tour", "TOUR-SEND hello", cwd=elsewhere), 90
    )
    assert code == 0, err
    assert out.strip() == "SEND-OK"

    data = tour.workdir / ".antler"  # as the README's script reads them
    admin = json.loads((data / "nats-users.json").read_text())["admin"]
    nc = await nats.connect(
        (data / "nats.url").read_text().strip(), user=admin["user"], password=admin["password"]
    )
    try:
        finals: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def on_reply(msg: Any) -> None:
            reply = json.loads(msg.data)
            if reply["chat_id"] == "nightly" and reply["kind"] != "partial":
                finals.put_nowait(reply)

        await nc.subscribe("antler.chat.out.script", cb=on_reply)
        for said in ("TOUR-RAW summarize", "/status"):
            inbound = {"channel": "script", "chat_id": "nightly", "text": said}
            await nc.jetstream().publish("antler.chat.in.script", json.dumps(inbound).encode())
        replies = {r["kind"]: r["text"] for r in [await asyncio.wait_for(finals.get(), 90) for _ in range(2)]}
    finally:
        await nc.close()
    assert replies["final"] == "RAW-OK"
    assert replies["command"], "the router answers a chat command itself"


async def test_subagent_mcp_skill_custom_agent_and_memory(tour: Tour) -> None:
    task = {"description": "count the herd", "prompt": "SUBTASK count the north herd",
            "subagent_type": "general-purpose"}  # fmt: skip
    tour.model.script(
        Reply(tool_calls=[ToolCall("task", task)], when="TOUR-TASK"),
        Reply(text="SUB-RESULT twelve deer", when="SUBTASK count the north herd"),
        Reply(text="TASK-DONE", when="SUB-RESULT twelve deer"),
        Reply(tool_calls=[ToolCall("add_numbers", {"a": 20, "b": 22})], when="TOUR-MCP"),
        Reply(text="MCP-DONE", when="the sum is 42"),
        Reply(text="SKILL-DONE", when="TOUR-SKILL"),
        Reply(text="AGENT-DONE", when="TOUR-AGENT"),
        Reply(text="Noted, Mia.", when="TOUR-MEM1"),
        Reply(text="MEM-DONE", when="TOUR-MEM2"),
    )
    values = await ask(tour, "TOUR-TASK delegate the counting", subagent_enabled=True)
    assert values["messages"][-1]["content"] == "TASK-DONE"
    assert "SUB-RESULT twelve deer" in tool_results(values)["task"]

    values = await ask(tour, "TOUR-MCP add 20 and 22")
    assert tool_results(values)["add_numbers"] == "the sum is 42"
    assert values["messages"][-1]["content"] == "MCP-DONE"

    values = await ask(tour, "/data-analysis TOUR-SKILL what is in my data?")
    assert values["messages"][-1]["content"] == "SKILL-DONE"
    assert '<active_skill name="data-analysis">' in system_prompt(request_with(tour.model, "TOUR-SKILL"))

    soul = "You are Quill TOUR-SOUL, a terse copy editor."
    created = await tour.http.post(
        "/agents", json={"name": "Quill", "description": "Edits copy", "soul": soul}
    )
    assert created.status_code == 201, created.text
    values = await ask(tour, "TOUR-AGENT fix: its great!!", agent_name="quill")
    assert values["messages"][-1]["content"] == "AGENT-DONE"
    assert soul in system_prompt(request_with(tour.model, "TOUR-AGENT"))

    fact = {"content": "Mia keeps bees TOUR-FACT", "category": "context", "confidence": 0.95}
    memory = {"user": {}, "newFacts": [fact], "factsToRemove": []}
    tour.memory_model.script(Reply(text=json.dumps(memory), when="TOUR-MEM1"))
    await ask(tour, "TOUR-MEM1 I'm Mia and I keep bees")

    async def remembered() -> bool:
        return "TOUR-FACT" in (await tour.http.get("/memory")).text

    await eventually(remembered, "the memory updater's fact")
    values = await ask(tour, "TOUR-MEM2 what do I keep?")
    assert values["messages"][-1]["content"] == "MEM-DONE"
    assert "Mia keeps bees TOUR-FACT" in system_prompt(request_with(tour.model, "TOUR-MEM2"))


async def test_clarification_plan_mode_cancel_and_enqueue(tour: Tour) -> None:
    question = {"question": "Which herd?", "options": ["north", "south"]}
    todos = [{"content": "Find the herds", "status": "completed"},
             {"content": "Count the deer", "status": "in_progress"}]  # fmt: skip
    tour.model.script(
        Reply(tool_calls=[ToolCall("ask_clarification", question)], when="TOUR-CLARIFY"),
        Reply(tool_calls=[ToolCall("write_todos", {"todos": todos})], when="TOUR-PLAN"),
        Reply(text="PLAN-DONE", when="Updated todo list"),
    )
    values = await ask(tour, "TOUR-CLARIFY count the deer")
    last = values["messages"][-1]
    assert (last["type"], last["name"]) == ("tool", "ask_clarification")
    assert last["content"] == "Which herd?\n1. north\n2. south"

    values = await ask(tour, "TOUR-PLAN count the deer", is_plan_mode=True)
    assert values["messages"][-1]["content"] == "PLAN-DONE"
    assert values["todos"] == todos

    # Cancel: a run whose model never answers, cancelled through the SDK.
    held = asyncio.Event()
    tour.model.script(Reply(text="never", when="TOUR-CANCEL", hold=held))
    thread = (await tour.sdk.threads.create())["thread_id"]
    run = await tour.sdk.runs.create(
        thread, "lead_agent", input={"messages": [{"role": "user", "content": "TOUR-CANCEL wait"}]}
    )
    await eventually(_asked(tour.model, "TOUR-CANCEL"), "the held model call")
    await tour.sdk.runs.cancel(thread, run["run_id"], wait=True)
    held.set()
    assert (await tour.sdk.runs.get(thread, run["run_id"]))["status"] == "interrupted"

    # Enqueue: a second run on a busy thread waits its turn, then runs on what the first left.
    first_held = asyncio.Event()
    tour.model.script(
        Reply(text="ENQ-FIRST", when="TOUR-ENQ-1", hold=first_held),
        Reply(text="ENQ-SECOND", when="TOUR-ENQ-2"),
    )
    thread = (await tour.sdk.threads.create())["thread_id"]
    runs = []
    for asked in ("TOUR-ENQ-1", "TOUR-ENQ-2"):
        runs.append(
            await tour.sdk.runs.create(
                thread,
                "lead_agent",
                input={"messages": [{"role": "user", "content": asked}]},
                multitask_strategy="enqueue",
            )
        )
        if asked == "TOUR-ENQ-1":
            await eventually(_asked(tour.model, "TOUR-ENQ-1"), "the first run's model call")
    assert (await tour.sdk.runs.get(thread, runs[1]["run_id"]))["status"] == "pending"
    first_held.set()
    for run in runs:
        await tour.sdk.runs.join(thread, run["run_id"])
    statuses = [(await tour.sdk.runs.get(thread, r["run_id"]))["status"] for r in runs]
    assert statuses == ["success", "success"]
    state = await tour.sdk.threads.get_state(thread)
    contents = [m["content"] for m in state["values"]["messages"]]
    assert contents == ["TOUR-ENQ-1", "ENQ-FIRST", "TOUR-ENQ-2", "ENQ-SECOND"]


def _asked(model: FakeOpenAI, marker: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(marker in str(m.get("content")) for r in model.agent_requests for m in r["messages"][-1:])

    return check
