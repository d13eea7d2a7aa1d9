"""The sandbox broker in a test's process, and whether bubblewrap works here (shared by every test
package that needs a sandbox: sandbox, skills, gateway, web UI, chat adapters)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from bus import Bus, NoResponders
from bus.messages import ExecReply, ExecRequest
from config import AppConfig
from sandbox import bwrap_works
from sandbox.broker import run as run_broker
from tests.conftest import running_component, until_answering

BWRAP = bwrap_works()
_WITH_BWRAP = pytest.mark.skipif(
    not BWRAP, reason="bubblewrap is not installed or cannot create namespaces here"
)
# bwrap commands share one unprivileged uid and so its process limit: the fork bomb test would
# starve another worker's bwrap test; they run on one worker, one after another.
_BWRAP_GROUP = pytest.mark.xdist_group("bwrap")


def needs_bwrap(test: Any) -> Any:
    """For a test of bwrap itself: skipped without it, and never beside another bwrap test."""
    return _BWRAP_GROUP(_WITH_BWRAP(test))


PROVIDERS = [
    pytest.param("local", id="local"),
    pytest.param("bwrap", id="bwrap", marks=[_WITH_BWRAP, _BWRAP_GROUP]),
]


def running_broker(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.sandbox("list_dir"), bus, task)

    return running_component(nats_url, config, run_broker, "broker", ready)


async def exec_once_up(bus: Bus, thread_id: str, command: str = "echo hi") -> ExecReply:
    """`command` run by the sandbox broker, asked until one answers (one starting in a child
    process, say): its reply. Fails after 30 s without a broker."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        try:
            request = ExecRequest(thread_id=thread_id, command=command)
            return await bus.request(bus.subjects.sandbox("exec"), request, ExecReply, timeout=10)
        except NoResponders:
            assert loop.time() < deadline, "the sandbox broker never answered"
            await asyncio.sleep(0.05)
