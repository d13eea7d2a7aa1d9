"""LangSmith and Langfuse, switched on by their usual environment, trace each run with its thread and
user: runner and subagent executor processes as `antler run` starts them, the services faked on
loopback (`tests/fakes/tracing_services.py`, their SDKs' own wire formats)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from bus.messages import ChatTurn, MemoryUpdate
from bus.runs import collect_run, submit_run
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.tracing_services import FakeTracingServices
from tests.support.memory import facts, memory_of, memory_reply
from tests.support.ports import free_port
from tests.support.runner import ask, submit_and_collect
from tests.support.subagents import delegate, task_call

pytestmark = pytest.mark.asyncio

UNSET = {  # whatever the machine running the tests has set, these tests set their own
    name: ""
    for name in (
        "LANGSMITH_TRACING",
        "LANGSMITH_TRACING_V2",
        "LANGCHAIN_TRACING_V2",
        "LANGCHAIN_TRACING",
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
        "LANGFUSE_TRACING",
        "LANGFUSE_PUBLIC_KEY",
        "LANGFUSE_SECRET_KEY",
    )
}


@pytest_asyncio.fixture
async def services() -> AsyncIterator[FakeTracingServices]:
    async with FakeTracingServices() as fake:
        yield fake


def environment(url: str, **more: str) -> dict[str, str]:
    return {
        **UNSET,
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_API_KEY": "lsv2-test-key",
        "LANGSMITH_ENDPOINT": url,
        "LANGSMITH_PROJECT": "antler-tests",
        "LANGFUSE_TRACING": "true",
        "LANGFUSE_PUBLIC_KEY": "pk-lf-test",
        "LANGFUSE_SECRET_KEY": "sk-lf-test",
        "LANGFUSE_BASE_URL": url,
        **more,
    }


class Components:
    """`antler run` processes of the test, each with an environment of its own, their output in one
    log (`said()`)."""

    def __init__(self, nats_url: str, config_file: Callable[[], Path], log: Path) -> None:
        self.nats_url = nats_url
        self.config_file = config_file
        self.log = log

    @contextlib.asynccontextmanager
    async def run(self, name: str, env: dict[str, str], config: Path | None = None) -> AsyncIterator[None]:
        """`antler run <name>` with `env` on `config` (the test's, written now, if None); stopped
        (SIGTERM, as operators stop it) on exit, and it must then end by itself."""
        args = (
            "-m",
            "antler",
            "run",
            name,
            "--nats-url",
            self.nats_url,
            "-c",
            str(config or self.config_file()),
        )
        with self.log.open("ab") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                *args,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO), **env},
                stdout=out,
                stderr=out,
            )
        try:
            yield
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
                    raise AssertionError(f"{name} did not stop on SIGTERM") from None

    def said(self) -> str:
        return self.log.read_text(encoding="utf-8")


@pytest.fixture
def components(nats_url: str, config_file: Callable[[], Path], tmp_path: Path) -> Components:
    return Components(nats_url, config_file, tmp_path / "components.log")


async def until_answering(bus: Bus) -> None:
    """Until a runner (and the subagent executor it needs) has answered a first run."""
    events = await submit_and_collect(bus, ask("t-warm-up", "are you there?"), timeout=90)
    assert events[-1].data["status"] == "success", events[-1].data


def meta(span: dict[str, Any], key: str) -> Any:
    """A Langfuse span's LangChain metadata value (the SDK sends each as JSON)."""
    raw = span.get(f"langfuse.observation.metadata.{key}")
    return json.loads(raw) if isinstance(raw, str) else raw


async def test_a_turn_and_its_subagent_are_traced_in_langsmith_and_langfuse_with_their_thread_and_user(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    config_file: Callable[[], Path],
    services: FakeTracingServices,
    tmp_path: Path,
    components: Components,
) -> None:
    """Both ways of switching the services on, one per process (both go through
    `llm.tracing_services`; a process each would double the test's cost): the runner by the
    usual environment, the subagent executor by config.yaml with the keys in the environment."""
    fake_model.script(
        Reply(text="Yes.", when="are you there?"),
        Reply(tool_calls=[task_call("call_t", "Summarize the report")]),
        Reply(text="The report says sales grew.", when="Summarize the report"),
        Reply(text="Sales grew, says the report.", when="sales grew"),
    )
    by_environment = environment(services.url)
    by_config = by_environment | {"LANGSMITH_TRACING": "", "LANGFUSE_TRACING": ""}
    config = config_file().rename(tmp_path / "config-runner.yaml")  # no switch in it
    config_data["observability"] = {"langsmith": True, "langfuse": True}
    switched_on = config_file()
    request = delegate("t-traced", "Summarize the report for me").model_copy(update={"user_id": "ana"})
    async with (
        components.run("runner", by_environment, config),
        components.run("subagents", by_config, switched_on),
    ):
        await until_answering(bus)
        await submit_run(bus, request)
        events = await collect_run(bus, request.run_id, timeout=90)
        assert events[-1].data["status"] == "success", events[-1].data

        def roots() -> list[dict[str, Any]]:  # LangSmith: the turn's runs, ended (patched)
            return [
                r
                for r in services.runs
                if not r.get("parent_run_id")
                and r.get("end_time")
                and r.get("extra", {}).get("metadata", {}).get("run_id") == request.run_id
            ]

        def agents() -> list[dict[str, Any]]:  # Langfuse: the root span of each of the turn's traces
            return [
                s
                for s in services.spans
                if s.get("langfuse.observation.type") == "agent" and meta(s, "run_id") == request.run_id
            ]

        await services.wait(lambda: len(roots()) == 2 and len(agents()) == 2, timeout=30)

    # LangSmith: the lead run and the subagent's, each a root with the thread and the user
    lead = next(r for r in roots() if r["name"] == "lead_agent")
    subagent = next(r for r in roots() if r is not lead)
    for run in (lead, subagent):
        metadata = run["extra"]["metadata"]
        assert metadata["thread_id"] == "t-traced", "the parent's thread: LangSmith's threads view"
        assert metadata["user_id"] == "ana"
        assert run["session_name"] == "antler-tests", "the project LANGSMITH_PROJECT names"
    assert subagent["extra"]["metadata"]["parent_run_id"] == request.run_id
    assert "agent:lead_agent" in lead["tags"]
    below = services.children(lead)
    assert any(r["run_type"] == "llm" for r in below), "the model call, inside the run"
    assert any(r["run_type"] == "tool" and r["name"] == "task" for r in below), (
        "the tool call, inside the run"
    )
    assert any(r["run_type"] == "llm" for r in services.children(subagent))
    # Traced in LangSmith, the middleware steps are spans too (compiled without them otherwise).
    assert any(r["name"].endswith(".awrap_model_call") for r in below), "the middleware steps"
    assert any(r["name"].endswith(".awrap_model_call") for r in services.children(subagent))
    assert "lsv2-test-key" in services.auth, "LangSmith was called with its key"

    # Langfuse: one trace per run, its session the thread, its user the user, everything inside it
    traces = services.traces()
    by_agent = {meta(s, "agent"): traces[s["trace_id"]] for s in agents()}
    assert set(by_agent) == {"lead_agent", "subagent:general-purpose"}
    for name, trace in by_agent.items():
        assert (trace["session"], trace["user"], trace["name"]) == ("t-traced", "ana", name)
        kinds = {s.get("langfuse.observation.type") for s in trace["spans"]}
        assert "generation" in kinds, f"{name}: its model calls are in its trace"
    assert any(
        s.get("langfuse.observation.type") == "tool" and s["name"] == "task"
        for s in by_agent["lead_agent"]["spans"]
    ), "the lead's tool call is in its trace"
    strays = [
        s
        for s in services.spans
        if meta(s, "run_id") == request.run_id and traces[s["trace_id"]]["session"] is None
    ]
    assert strays == [], "no span of the turn lands in a trace of its own"
    assert any(a.startswith("Basic ") for a in services.auth), "Langfuse with its key pair"


async def test_a_service_switched_on_without_its_key_or_off_in_config_sends_nothing_and_runs_answer(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    services: FakeTracingServices,
    components: Components,
) -> None:
    fake_model.script(
        Reply(text="Answered all the same.", when="hello"), Reply(text="And again.", when="again")
    )
    config_data["observability"] = {"langfuse": False}  # the config's false wins over LANGFUSE_TRACING
    env = environment(services.url, LANGSMITH_API_KEY="")
    async with components.run("runner", env):
        for text in ("hello", "and again"):
            events = await submit_and_collect(bus, ask("t-no-key", text, user_id="ana"), timeout=90)
            assert events[-1].data["status"] == "success", events[-1].data
    said = components.said()
    assert said.count("LangSmith tracing is on but LANGSMITH_API_KEY is not set") == 1, said
    assert services.runs == [], "LangChain's own LANGSMITH_TRACING switch is off too"
    assert services.spans == []


async def test_an_unreachable_service_does_not_stop_a_run_from_answering(
    bus: Bus, fake_model: FakeOpenAI, components: Components
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    fake_model.script(Reply(text="Still here.", when="hello"), Reply(text="Still here again.", when="again"))
    async with components.run("runner", environment(nowhere)):
        for text in ("hello", "and again"):
            events = await submit_and_collect(bus, ask("t-nowhere", text, user_id="ana"), timeout=90)
            assert events[-1].data["status"] == "success", events[-1].data
            final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
            assert final["content"].startswith("Still here")
    said = components.said()
    assert "langsmith tracing on" in said, "the runs were traced, the sending failed"
    assert "langfuse tracing on" in said


async def test_with_nothing_switched_on_a_run_carries_no_callback_and_imports_no_tracing_library() -> None:
    script = """
import asyncio, sys
from llm.tracing_services import with_tracing
from config import AppConfig
graph = {"metadata": {"run_id": "r1"}}
asyncio.run(with_tracing(graph, AppConfig(), thread_id="t", user_id="u", run_id="r1", agent="a", model=None))
print(sorted(graph), "langfuse" in sys.modules)
"""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **UNSET},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().split() == ["['metadata']", "False"]


@pytest.mark.parametrize("langsmith", [False, None], ids=["off-in-config", "on-by-environment"])
async def test_the_memory_updater_traces_its_model_calls_as_agent_runs_do(
    langsmith: bool | None,
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    services: FakeTracingServices,
    components: Components,
) -> None:
    """`observability.langsmith: false` holds in the memory updater's process too (LangChain would
    trace its model calls on LANGSMITH_TRACING by itself); switched on, its calls are traced."""
    config_data["memory"] = {"enabled": True, "debounce_seconds": 0}
    config_data["observability"] = {"langsmith": langsmith, "langfuse": False}
    fake_model.script(memory_reply("Plays the cello"))
    update = MemoryUpdate(
        user_id="cleo",
        thread_id="t-cleo",
        messages=[
            ChatTurn(role="user", content="I play the cello"),
            ChatTurn(role="assistant", content="Nice."),
        ],
    )
    async with components.run("memory", environment(services.url)):
        await bus.publish(bus.subjects.memory_update("t-cleo"), update)
        assert facts(await memory_of(bus, "cleo", lambda d: bool(d.facts))) == ["Plays the cello"]
        if langsmith is None:
            await services.wait(lambda: any(r.get("name") == "memory_update" for r in services.runs))
    if langsmith is False:  # the process has ended: what its tracer held is sent by now
        assert services.runs == [], "nothing reaches LangSmith when the config says off"
