"""Antler on the NATS agent protocol, reached with the unmodified client SDK (`synadia-ai-agents`).

One `antler up` child for the module, on its defaults (one NATS user per component; the
`agentproto` component among them), with short heartbeat and keep-alive intervals. Each owner's
client connects with the credentials `antler creds --agent-owner` mints while it runs, never as
the admin; the admin connection is the test's own probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
import yaml
from nats.aio.client import Client
from synadia_ai.agents import Agent, Agents, Attachment, DiscoverFilter, ProtocolError, Query, ResponseChunk

from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.antler_up import AntlerUp

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("agentproto")]

PREFIX = "prototest"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-test") as fake:
        yield fake


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory, model: FakeOpenAI) -> AsyncIterator[AntlerUp]:
    workdir = tmp_path_factory.mktemp("proto-up")
    config = {
        "bus": {"prefix": PREFIX},
        "runner": {"processes": 1},
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url,
             "max_retries": 0},
        ],
        "gateway": {"port": 0},
        "sandbox": {"provider": "local"},
        "memory": {"enabled": False},
        "agent_protocol": {"heartbeat_seconds": 1, "keepalive_seconds": 0.5},
        # Only bash commands that say NEEDS-APPROVAL ask (the other tests' run unasked).
        "approvals": {"enabled": True, "rules": [
            {"tools": ["bash"], "action": "ask", "unless_command": ["(?!.*NEEDS-APPROVAL)"]},
        ]},
    }  # fmt: skip
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    stack = AntlerUp(workdir)
    try:
        await stack.start(runners=0)  # the runner runs inside `antler up` (one process)
        yield stack
        # The tripwire: only the refusals a test provoked (bob stepping outside his owner); alice's
        # client, used as the SDK is, was never refused anything.
        others = [v for v in stack.violations() if not v.startswith(f"{PREFIX}-client-agents-bob")]
        assert others == []
    finally:
        await stack.kill_all()


_minted: dict[tuple[Path, str], dict[str, Any]] = {}


async def mint(up: AntlerUp, owner: str) -> dict[str, Any]:
    """`antler creds --agent-owner`'s context for `owner`, minted once per stack: minting again gives
    the same credentials (tests/antler/test_client_creds.py) and costs a process start."""
    key = (up.workdir, owner)
    if key not in _minted:
        code, out, err = await finished(await run_antler("creds", "--agent-owner", owner, cwd=up.workdir))
        assert code == 0, err
        _minted[key] = dict(json.loads(out))
    return _minted[key]


@contextlib.asynccontextmanager
async def client(up: AntlerUp, owner: str) -> AsyncIterator[tuple[Agents, Client, asyncio.Queue[Exception]]]:
    """A protocol client of `owner`, as an SDK user connects: the minted context's URL and user."""
    context = await mint(up, owner)
    errors: asyncio.Queue[Exception] = asyncio.Queue()

    async def on_error(exc: Exception) -> None:
        errors.put_nowait(exc)

    nc = await nats.connect(
        context["url"], user=context["user"], password=context["password"], error_cb=on_error
    )
    agents = Agents(nc=nc)
    try:
        yield agents, nc, errors
    finally:
        if not nc.is_closed:  # a test may have closed it (the caller going away)
            await agents.close()
            await nc.close()


async def find(agents: Agents, agent: str, owner: str) -> Agent:
    """The agent, once discovery lists it (the host registers an owner when it is enabled)."""
    for _ in range(100):
        found = await agents.discover(filter=DiscoverFilter(agent=agent, owner=owner, session_name="main"))
        if found:
            return found[0]
    raise AssertionError(f"{agent} of {owner} was never discovered")


async def test_discovers_the_lead_agent_and_the_owners_custom_agents(up: AntlerUp) -> None:
    await _custom_agent(up, "alice", "researcher")
    async with client(up, "alice") as (agents, _, _):
        lead = await find(agents, "antler", "alice")
        custom = await find(agents, "researcher", "alice")
    assert (lead.session_name, lead.protocol_version) == ("main", "0.3")
    assert lead.prompt_subject == "agents.prompt.antler.alice.main"
    assert custom.prompt_subject == "agents.prompt.researcher.alice.main"


async def test_a_prompt_streams_its_answer_in_chunks(up: AntlerUp, model: FakeOpenAI) -> None:
    model.script(Reply(text="Streaming works, one word at a time.", when="STREAM-ME", chunk_delay=0.05))
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        messages = [m async for m in agent.prompt("STREAM-ME please")]
    statuses = [m.status for m in messages if not isinstance(m, ResponseChunk | Query)]
    texts = [m.text for m in messages if isinstance(m, ResponseChunk)]
    assert statuses[0] == "ack"
    assert len(texts) > 1, "the answer streams, not one piece at the end"
    assert "".join(texts) == "Streaming works, one word at a time."


async def test_an_attachment_reaches_the_agent_as_an_uploaded_file(up: AntlerUp, model: FakeOpenAI) -> None:
    model.script(Reply(text="Got your notes.", when="READ-ATTACHED"))
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        note = Attachment.from_bytes("notes.txt", b"remember the milk")
        texts = [
            m.text
            async for m in agent.prompt("READ-ATTACHED", attachments=[note])
            if isinstance(m, ResponseChunk)
        ]
    assert "".join(texts) == "Got your notes."
    asked = json.dumps(model.agent_requests[-1]["messages"])
    assert "/mnt/user-data/uploads/notes.txt" in asked


async def test_tool_steps_are_status_chunks_and_presented_files_come_as_attachments(
    up: AntlerUp, model: FakeOpenAI
) -> None:
    write = "mkdir -p /mnt/user-data/outputs && printf '# Report' > /mnt/user-data/outputs/report.md"
    model.script(
        Reply(tool_calls=[ToolCall("bash", {"description": "write", "command": write})], when="MAKE-FILE"),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/report.md"]})]),
        Reply(text="Here it is."),
    )
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        messages = [m async for m in agent.prompt("MAKE-FILE please")]
    statuses = [m.status for m in messages if not isinstance(m, ResponseChunk | Query)]
    texts = [m.text for m in messages if isinstance(m, ResponseChunk)]
    files = [a for m in messages if isinstance(m, ResponseChunk) for a in m.attachments or []]
    assert statuses[:1] == ["ack"]
    assert ["tool:bash", "tool_done:bash", "tool:present_files", "tool_done:present_files"] == [
        s for s in statuses if s.startswith("tool")
    ]
    assert "".join(texts) == "Here it is."
    assert [(f.filename, f.to_bytes()) for f in files] == [("report.md", b"# Report")]


async def prompt_replying(up: AntlerUp, text: str, reply: str) -> tuple[list[str], str]:
    """alice prompts Antler's agent with `text` and replies `reply` to each query it makes: the
    queries' prompts, and the answer's text."""
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        questions, texts = [], []
        async for message in agent.prompt(text):
            if isinstance(message, Query):
                questions.append(message.prompt)
                await message.reply(reply)
            elif isinstance(message, ResponseChunk):
                texts.append(message.text)
    return questions, "".join(texts)


async def test_a_clarification_is_a_query_whose_answer_resumes_the_conversation(
    up: AntlerUp, model: FakeOpenAI
) -> None:
    model.script(
        Reply(tool_calls=[ToolCall("ask_clarification", {"question": "Which city?"})], when="WEATHER-Q"),
        Reply(text="Sunny in Paris.", when="Paris"),
    )
    questions, answer = await prompt_replying(up, "WEATHER-Q: how is the weather?", "Paris")
    assert questions == ["Which city?"]
    assert answer == "Sunny in Paris."


async def test_a_tool_call_waiting_for_approval_is_a_query_answered_on_the_protocol(
    up: AntlerUp, model: FakeOpenAI
) -> None:
    model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo NEEDS-APPROVAL ok"})], when="APPROVE-Q"),
        Reply(text="It said ok.", when="NEEDS-APPROVAL ok"),
    )
    questions, answer = await prompt_replying(up, "APPROVE-Q: run it", "approve")
    assert questions == ["May I run bash: echo NEEDS-APPROVAL ok? Answer approve, or deny with a reason."]
    assert answer.endswith("It said ok.")
    ran = model.agent_requests[-1]["messages"][-1]
    assert ran["role"] == "tool"
    assert "NEEDS-APPROVAL ok" in ran["content"]


async def test_heartbeats_arrive_for_each_discovered_session(up: AntlerUp) -> None:
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        beat = asyncio.get_running_loop().create_future()
        agents.on_heartbeat(agent.instance_id, lambda p: beat.done() or beat.set_result(p))
        payload = await asyncio.wait_for(beat, 30)
        status = await agent.status()
    assert (payload.agent, payload.owner, payload.session) == ("antler", "alice", "main")
    assert status.instance_id == agent.instance_id


async def test_a_failed_run_ends_the_stream_with_a_protocol_error(up: AntlerUp, model: FakeOpenAI) -> None:
    model.script(Reply(text="the model is down", status=400, when="FAIL-ME"))
    async with client(up, "alice") as (agents, _, _):
        agent = await find(agents, "antler", "alice")
        with pytest.raises(ProtocolError, match="service error 500"):
            async for _ in agent.prompt("FAIL-ME"):
                pass


async def test_a_caller_that_goes_away_cancels_its_run(up: AntlerUp, model: FakeOpenAI) -> None:
    hold = asyncio.Event()
    model.script(Reply(text="never seen", when="SLOW-ONE", hold=hold))
    async with _run_ends(up) as ended, client(up, "alice") as (agents, _, _):
        try:
            agent = await find(agents, "antler", "alice")
            asked_before = len(model.agent_requests)
            stream = agent.prompt("SLOW-ONE")
            assert (await anext(stream)).status == "ack"  # type: ignore[union-attr]
            await model.wait_for_requests(asked_before + 1)  # the run is at the model
            await stream.aclose()
            await agents.connection.close()  # the caller is gone: nobody listens on its reply subject
            # The host notices at its next keep-alive and cancels the run.
            status = await asyncio.wait_for(ended.get(), 60)
        finally:
            hold.set()
    assert status == "interrupted"


async def test_another_owners_client_cannot_prompt_or_ask_about_the_first_owners_sessions(
    up: AntlerUp, model: FakeOpenAI
) -> None:
    async with client(up, "alice") as (alice_agents, _, _):
        alices = await find(alice_agents, "antler", "alice")
    asked_before = len(model.agent_requests)
    async with client(up, "bob") as (agents, _, errors):
        await find(agents, "antler", "bob")  # bob's own agent: bob is served
        stream = agent_for(agents, alices).prompt("BOB-INTRUDES", timeout=5)
        with pytest.raises(ProtocolError):  # nothing ever answers
            async for _ in stream:
                pass
        refusal = await asyncio.wait_for(errors.get(), 10)
    assert "permissions violation" in str(refusal).lower()
    assert "agents.prompt.antler.alice.main" in str(refusal).lower()
    assert all("BOB-INTRUDES" not in json.dumps(r) for r in model.agent_requests[asked_before:])


def agent_for(agents: Agents, discovered: Agent) -> Agent:
    """`discovered` (seen by another client) as a handle on `agents`' connection."""
    return Agent(agents.connection, discovered.info)


async def _custom_agent(up: AntlerUp, owner: str, name: str) -> None:
    """Create `owner`'s custom agent as the gateway would (the admin writes the agents bucket)."""
    from bus import Bus
    from bus.agent_store import AgentStore
    from config import BusConfig

    user, password = _admin(up)
    bus = await Bus.connect(await up.nats_url(), BusConfig(prefix=PREFIX, user=user, password=password))
    try:
        store = await AgentStore.open(bus)
        if await store.get(owner, name) is None:
            await store.create(owner, name, {"description": "finds things"})
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def _run_ends(up: AntlerUp) -> AsyncIterator[asyncio.Queue[str]]:
    """The statuses of runs that end from now on (the admin's core subscription to run events)."""
    user, password = _admin(up)
    nc = await nats.connect(await up.nats_url(), user=user, password=password)
    ends: asyncio.Queue[str] = asyncio.Queue()

    async def on_event(msg: Any) -> None:
        event = json.loads(msg.data)
        if event.get("event") == "end":
            ends.put_nowait((event.get("data") or {}).get("status"))

    try:
        await nc.subscribe(f"{PREFIX}.runs.ev.>", cb=on_event)
        await nc.flush()
        yield ends
    finally:
        await nc.close()


def _admin(up: AntlerUp) -> tuple[str, str]:
    saved = json.loads((up.data_dir / "nats-users.json").read_text(encoding="utf-8"))["admin"]
    return saved["user"], saved["password"]
