"""`Client.embedded()`: the blocking client with an Antler of its own, started by the call and gone
when the client is closed, and a config it cannot start with refused with Antler's own words."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from antler import Client
from antler.client import AntlerNotRunning, InvalidRequest
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.xdist_group("client-embedded")


async def test_the_blocking_client_starts_and_stops_its_own_antler(tmp_path: Path) -> None:
    async with FakeOpenAI(api_key="sk-test") as model:
        config = tmp_path / "config.yaml"
        config.write_text(
            "models:\n"
            f"  - {{name: fake, model: fake-1, api_key: sk-test, base_url: '{model.base_url}'}}\n"
            "runner: {processes: 1}\ngateway: {port: 0}\n",
            encoding="utf-8",
        )

        def script() -> dict[str, Any]:
            with Client.embedded(config) as client:
                found = {"answer": client.chat("hello blocking"), "models": client.list_models()}
                # A second one on the same directory cannot start: that Antler says why.
                with pytest.raises(AntlerNotRunning, match="stopped before it was up") as refused:
                    Client.embedded(config)
                found["refused"] = str(refused.value)
                return found

        # The blocking calls go in a thread: this test's loop serves the scripted model meanwhile.
        found = await asyncio.to_thread(script)

    assert found["answer"] == "You said: hello blocking"
    assert [m["name"] for m in found["models"]["models"]] == ["fake"]
    assert "already" in found["refused"].lower() or "lock" in found["refused"].lower()
    assert not _still_running(tmp_path)


def _still_running(workdir: Path) -> bool:
    """Whether an Antler still runs in `workdir` (its data dir's lock is held)."""
    import fcntl

    with open(workdir / ".antler" / "antler.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def test_a_config_antler_cannot_start_with_is_refused_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="config: no file"):
        Client.embedded(tmp_path / "missing.yaml")
    with pytest.raises(InvalidRequest, match=r"bus\.prefix"):
        Client.embedded({"bus": {"prefix": "not a prefix!"}})
