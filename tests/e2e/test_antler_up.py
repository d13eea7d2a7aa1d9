"""The whole system as a user starts it: `antler up` with a model, then `antler send` and the HTTP API."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import REPO, finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.nats_users import logged_violations

pytestmark = pytest.mark.asyncio


async def test_up_then_send_then_the_api_sees_the_same_conversation(
    tmp_path: Path, fake_model: FakeOpenAI
) -> None:
    config = {
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "$FAKE_KEY", "base_url": fake_model.base_url}
        ],
        "gateway": {"port": 0},
        # A toolbox of its own (no packages, so no package index): the first `up` installs it.
        "sandbox": {"provider": "local", "toolbox": {"path": "box", "python_packages": []}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {"FAKE_KEY": "sk-test"}
    up = await run_antler("up", cwd=tmp_path, env=env)
    try:
        assert up.stdout is not None
        lines = [(await asyncio.wait_for(up.stdout.readline(), 60)).decode() for _ in range(2)]
        gateway = next(line.split()[1] for line in lines if line.startswith("Gateway:"))
        assert (tmp_path / "box" / "python" / "antler-toolbox.json").is_file(), "installed before the sandbox"

        fake_model.script(Reply(text="Hello from Antler.", chunk_delay=0.02))
        code, out, err = await finished(
            await run_antler("send", "hi there", "--chat", "me", cwd=tmp_path, env=env), 60
        )
        assert code == 0, err
        assert out.strip() == "Hello from Antler."

        async with httpx.AsyncClient(base_url=f"{gateway}/api", timeout=30) as http:
            threads = (await http.post("/threads/search", json={"limit": 10})).json()
            assert threads == [], "chat threads belong to the chat's user, not to the API's default user"
            reply = await http.post(
                "/runs/wait",
                json={
                    "assistant_id": "lead_agent",
                    "input": {"messages": [{"role": "user", "content": "ping"}]},
                },
            )
            assert reply.json()["messages"][-1]["content"] == "You said: ping"
    finally:
        await _stop(up, tmp_path / ".antler")


async def _gateway_of(up: asyncio.subprocess.Process) -> str:
    """The gateway's URL, from the lines `antler up` prints once it is up."""
    assert up.stdout is not None
    lines = [(await asyncio.wait_for(up.stdout.readline(), 90)).decode() for _ in range(2)]
    return next(line.split()[1] for line in lines if line.startswith("Gateway:"))


async def _stop(up: asyncio.subprocess.Process, data_dir: Path) -> None:
    """Ctrl-C; it exits cleanly, and its server refused none of its components (the tripwire)."""
    up.send_signal(signal.SIGINT)
    code, _, err = await finished(up, 60)
    assert code == 0, err
    assert logged_violations(data_dir) == []


async def test_a_catastrophic_grep_pattern_never_freezes_antler_up(
    tmp_path: Path, fake_model: FakeOpenAI
) -> None:
    config = {
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": fake_model.base_url}
        ],
        "gateway": {"port": 0},
        "memory": {"enabled": False},
        "sandbox": {"grep_timeout_seconds": 5},  # bwrap where the host has it, as on defaults
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    workspace = "/mnt/user-data/workspace"
    # What a prompt injection can make the agent do: `(a+)+$` backtracks exponentially on "aaa…a!".
    fake_model.script(
        Reply(
            tool_calls=[ToolCall("write_file", {"path": f"{workspace}/a.txt", "content": "a" * 34 + "!\n"})]
        ),
        Reply(tool_calls=[ToolCall("grep", {"pattern": "(a+)+$", "path": workspace})]),
        Reply(text="That search was too slow."),
    )
    up = await run_antler("up", cwd=tmp_path)
    try:
        gateway = await _gateway_of(up)
        async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
            run = asyncio.create_task(
                http.post(
                    "/api/runs/wait",
                    json={
                        "assistant_id": "lead_agent",
                        "input": {"messages": [{"role": "user", "content": "go"}]},
                    },
                    timeout=120,
                )
            )
            await fake_model.wait_for_requests(2, timeout=60)  # the model has asked for the grep
            answered = 0
            while not run.done():  # all through the search, the gateway answers (a freeze times out)
                assert (await http.get("/health")).status_code == 200
                answered += 1
                await asyncio.sleep(0.2)
            reply = (await run).json()
        assert answered > 0
        tool_result = fake_model.agent_requests[2]["messages"][-1]
        assert tool_result["role"] == "tool"
        assert "grep stopped after 5s: the pattern took too long" in str(tool_result["content"])
        assert reply["messages"][-1]["content"] == "That search was too slow."
    finally:
        await _stop(up, tmp_path / ".antler")


async def test_folders_named_like_antlers_packages_where_it_starts_do_not_shadow_them(
    tmp_path: Path, fake_model: FakeOpenAI
) -> None:
    config = {
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": fake_model.base_url}
        ],
        "gateway": {"port": 0},
        "runner": {"processes": 2},
        "skills": {"path": "./skills"},
        "sandbox": {"provider": "local"},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    skill = tmp_path / "skills" / "public" / "demo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A demo skill\n---\nDo it.\n", encoding="utf-8"
    )
    (tmp_path / "bus").mkdir()
    (tmp_path / "bus" / "__init__.py").write_text("raise ImportError('the user\\'s own bus package')\n")
    (tmp_path / "config").mkdir()  # a plain folder too
    # As the installed `antler` command starts: the working directory is not on its own sys.path.
    up = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",
        "-m",
        "antler",
        "up",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        gateway = await _gateway_of(up)
        async with httpx.AsyncClient(base_url=f"{gateway}/api", timeout=60) as http:
            reply = await http.post(
                "/runs/wait",
                json={
                    "assistant_id": "lead_agent",
                    "input": {"messages": [{"role": "user", "content": "ping"}]},
                },
            )
        assert reply.json()["messages"][-1]["content"] == "You said: ping"
    finally:
        await _stop(up, tmp_path / ".antler")
