"""Driving a skill as a user does, for the skills' end-to-end tests: a stack (bus, scripted model,
config, toolbox; `skill_stack` starts one for a module), `/<skill>` sent with the model's tool
calls scripted one a turn, and what came back (each tool's results, the thread's outputs)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bus import Bus, connect_and_provision
from config import AppConfig
from sandbox.paths import ThreadFS
from sandbox.toolbox import Toolbox
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.skills.conftest import SKILLS
from tests.support.module_stack import module_stack
from tests.support.nats_users import SecuredServer
from tests.support.runner import ask, running_runner, submit_and_collect
from tests.support.sandbox import BWRAP, running_broker

# The marks of a module of skill runs on one module-wide stack: commands run as the sandbox uid,
# like the other bwrap tests, so on their worker, one at a time.
SKILL_RUNS = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("bwrap"),
    pytest.mark.skipif(not BWRAP, reason="bubblewrap is not installed or cannot create namespaces here"),
]
WS = "/mnt/user-data/workspace"
OUT = "/mnt/user-data/outputs"
UP = "/mnt/user-data/uploads"
USER = "ana"


@dataclass
class Stack:
    bus: Bus
    model: FakeOpenAI
    config: AppConfig
    toolbox: Toolbox

    def outputs(self, thread: str) -> Path:
        root = Path(self.config.sandbox.data_dir or Path(self.config.bus.data_dir) / "sandbox").resolve()
        return ThreadFS(root, USER, thread).outputs

    def uploads(self, thread: str) -> Path:
        root = Path(self.config.sandbox.data_dir or Path(self.config.bus.data_dir) / "sandbox").resolve()
        return ThreadFS(root, USER, thread).uploads


@dataclass
class Used:
    """One skill run: the tool results the model saw (by tool) and the thread's outputs folder."""

    results: dict[str, list[str]] = field(default_factory=dict)
    outputs: Path = Path()
    system: str = ""


async def use_skill(
    stack: Stack,
    skill: str,
    ask_text: str,
    *steps: ToolCall,
    thread: str = "",
    context: dict[str, Any] | None = None,
) -> Used:
    """Send `/<skill> <ask_text>` (with the run's `context`, as a client would set it); the model
    makes `steps` one tool call a turn, then answers."""
    thread = thread or f"t-{skill}-{uuid.uuid4().hex[:6]}"
    before = len(stack.model.agent_requests)
    stack.model.script(*(Reply(tool_calls=[step]) for step in steps), Reply(text="Here it is."))
    events = await submit_and_collect(
        stack.bus,
        ask(thread, f"/{skill} {ask_text}", user_id=USER, **({"context": context} if context else {})),
        timeout=300,
    )
    assert events[-1].event == "end", events[-1]
    used = Used(outputs=stack.outputs(thread))
    used.system = stack.model.agent_requests[before]["messages"][0]["content"]
    for event in events:
        if event.event == "messages" and event.data[0].get("type") == "tool":
            used.results.setdefault(event.data[0]["name"], []).append(event.data[0]["content"])
    assert f'<active_skill name="{skill}">' in used.system, "the slash command activated the skill"
    return used


@contextlib.asynccontextmanager
async def skill_stack(
    nats_server: SecuredServer, tmp: Path, toolbox: Toolbox, **sandbox: Any
) -> AsyncIterator[Stack]:
    """Runner and bwrap sandbox broker on a fresh prefix with the repository's skills, commands given
    110 s; `sandbox`: more of that section."""
    sandbox_section = {"provider": "bwrap", "command_timeout_seconds": 110, "cpu_seconds": 110, **sandbox}
    skills = {"path": str(SKILLS)}
    async with module_stack(
        nats_server, tmp, {"ack_wait_seconds": 30}, skills=skills, sandbox=sandbox_section
    ) as up:
        bus = await connect_and_provision(nats_server.url, up.admin, name="test")
        try:
            async with running_broker(nats_server.url, up.config), running_runner(nats_server.url, up.config):
                yield Stack(bus, up.model, up.config, toolbox)
        finally:
            await bus.close()


def write(path: str, content: str | dict[str, Any] | list[Any]) -> ToolCall:
    text = content if isinstance(content, str) else json.dumps(content, indent=1)
    return ToolCall("write_file", {"path": path, "content": text})


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def present(*paths: str) -> ToolCall:
    return ToolCall("present_files", {"filepaths": list(paths)})


def ran_cleanly(used: Used) -> str:
    """Every bash call's output, after checking none exited non-zero."""
    outputs = used.results.get("bash", [])
    assert outputs, "the model ran the skill's script"
    for output in outputs:
        assert "[exit code" not in output, output
    return "\n".join(outputs)
