"""The whole system as a user starts it: `antler up` with a model, then `antler send` and the HTTP API."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = pytest.mark.asyncio


async def test_up_then_send_then_the_api_sees_the_same_conversation(
    tmp_path: Path, fake_model: FakeOpenAI
) -> None:
    config = {
        "models": [
            {"name": "fake", "model": "fake-1", "api_key": "$FAKE_KEY", "base_url": fake_model.base_url}
        ],
        "gateway": {"port": 0},
        "sandbox": {"provider": "local"},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {"FAKE_KEY": "sk-test"}
    up = await run_antler("up", cwd=tmp_path, env=env)
    try:
        assert up.stdout is not None
        lines = [(await asyncio.wait_for(up.stdout.readline(), 60)).decode() for _ in range(2)]
        gateway = next(line.split()[1] for line in lines if line.startswith("Gateway:"))

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
        up.send_signal(signal.SIGINT)
        code, _, err = await finished(up, 60)
    assert code == 0, err
