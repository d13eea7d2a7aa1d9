"""What the adapter tests share: two copies of an adapter as processes (`start_copies`;
`lease_holder`: which copy is active; `copy_logs`); and from `tests.support.adapters` the fake platforms,
`start_adapter`, and the Telegram, Slack, Teams, Feishu and DingTalk stacks as fixtures."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import KeyNotFoundError

from bus import Bus, decode
from bus.messages import ComponentReady
from tests.conftest import REPO
from tests.fakes.openai_server import Reply, ToolCall
from tests.support.adapters import (  # noqa: F401  (fixtures)
    ENQUEUE,
    StartAdapter,
    dingtalk,
    dingtalk_stack,
    discord,
    feishu,
    feishu_stack,
    slack,
    slack_stack,
    start_adapter,
    teams,
    teams_stack,
    telegram,
    telegram_stack,
    wechat,
    wecom,
)
from tests.support.chat import router_stack  # noqa: F401  (a fixture)
from tests.support.runner import bash_needs_approval, start_stack  # noqa: F401  (fixtures)


@contextlib.asynccontextmanager
async def adapter_processes(
    config: Path, nats_url: str, logs: Path, count: int, platform: str = "telegram"
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """`count` `antler run <platform>` processes (stderr to files: a pipe nobody reads would fill up)."""
    procs = []
    try:
        for n in range(count):
            with (logs / f"{platform}-{n}.log").open("wb") as log:
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "antler",
                        "run",
                        platform,
                        "-c",
                        str(config),
                        "--nats-url",
                        nats_url,
                        cwd=REPO,
                        env={**os.environ, "PYTHONPATH": str(REPO)},
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=log,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        await asyncio.gather(*(asyncio.wait_for(p.wait(), 30) for p in procs), return_exceptions=True)
        for proc in procs:
            if proc.returncode is None:
                proc.kill()


Copies = list[asyncio.subprocess.Process]
# `async with start_copies(platform, settings) as copies:` the `start_copies` fixture.
StartCopies = Callable[
    ..., contextlib.AbstractAsyncContextManager[Copies]
]  # (platform, settings, channels=None)


@pytest.fixture
def start_copies(
    bus: Bus,
    start_adapter: StartAdapter,  # noqa: F811  (the fixture imported above)
    config_data: dict[str, Any],
    config_file: Callable[[], Path],
    nats_url: str,
    tmp_path: Path,
) -> StartCopies:
    """`start_copies(platform, settings)`: runner, router and two `antler run <platform>` processes
    (their logs `<tmp_path>/<platform>-<n>.log`), both up: one active, one standing by. Each message
    is its own run (`ENQUEUE`) unless `channels` says otherwise."""

    @contextlib.asynccontextmanager
    async def start(
        platform: str, settings: dict[str, Any], channels: dict[str, Any] | None = None
    ) -> AsyncIterator[Copies]:
        config_data["bus"]["lease_seconds"] = 4  # a busy machine stalls a process for a second or two
        ready: asyncio.Queue[int] = asyncio.Queue()

        async def on_ready(msg: Any) -> None:
            ready.put_nowait(decode(ComponentReady, msg.data).pid)

        await bus.nc.subscribe(bus.subjects.component_ready(platform), cb=on_ready)
        async with start_adapter(platform, settings, None, ENQUEUE if channels is None else channels):
            async with adapter_processes(config_file(), nats_url, tmp_path, 2, platform) as copies:
                pids = {await asyncio.wait_for(ready.get(), 60), await asyncio.wait_for(ready.get(), 60)}
                assert pids == {p.pid for p in copies}, "one active, one standing by"
                yield copies

    return start


async def lease_holder(bus: Bus, platform: str, copies: Copies) -> asyncio.subprocess.Process:
    """The copy holding the adapter's lease (its value names the holder's pid): the active one."""
    kv = await bus.kv(bus.subjects.leases_bucket)
    try:
        holder = (await kv.get(f"adapter.{platform}")).value or b""
    except KeyNotFoundError:
        pytest.fail(f"no copy of {platform} holds its lease")
    return next(p for p in copies if f"-{p.pid}-" in holder.decode())


def copy_logs(logs: Path, platform: str, tail: int = 3000) -> str:
    """The end of each copy's log, for a failure message."""
    return "\n".join((logs / f"{platform}-{n}.log").read_text()[-tail:] for n in range(2))


def writes_and_presents(path: str, content: str, answer: str) -> list[Reply]:
    """A model's script that writes a file in the thread's outputs, presents it, then answers."""
    return [
        Reply(tool_calls=[ToolCall("write_file", {"path": path, "content": content})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [path]})]),
        Reply(text=answer),
    ]


@contextlib.asynccontextmanager
async def copies_ready(
    bus: Bus, platform: str
) -> AsyncIterator[Callable[[list[asyncio.subprocess.Process]], Awaitable[None]]]:
    """Inside: `await all_ready(procs)` waits until each of the adapter processes said it is ready (the
    active copy serving, the others standing by) and checks that they are those processes."""
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    subscription = await bus.nc.subscribe(bus.subjects.component_ready(platform), cb=on_ready)

    async def all_ready(procs: list[asyncio.subprocess.Process]) -> None:
        pids = {await asyncio.wait_for(ready.get(), 90) for _ in procs}
        assert pids == {p.pid for p in procs}, "one copy active, the others standing by"

    try:
        yield all_ready
    finally:
        await subscription.unsubscribe()
