"""Every broker deletes a deleted thread's directories, including one that was down when it happened."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from bus import Bus
from bus.messages import ThreadDeleted, utcnow
from config import AppConfig
from sandbox import SandboxClient
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio


def thread_dir(config: AppConfig, user: str, thread: str) -> Path:
    return Path(config.bus.data_dir) / "sandbox" / "users" / user / "threads" / thread


async def test_a_broker_that_was_down_deletes_what_was_deleted_meanwhile_before_it_serves(
    bus: Bus, nats_url: str, make_config: Callable[..., AppConfig]
) -> None:
    config = make_config()
    async with running_broker(nats_url, config):
        await SandboxClient(bus, "ana", "gone").write_file("/mnt/user-data/workspace/old.txt", "old")
        await SandboxClient(bus, "ana", "kept").write_file("/mnt/user-data/workspace/mine.txt", "mine")
    # While no broker runs: "gone" is deleted; "reused" was deleted before its directory was made again.
    await bus.publish(bus.subjects.event("thread.deleted"), ThreadDeleted(thread_id="gone", user_id="ana"))
    reused = thread_dir(config, "ana", "reused")
    (reused / "user-data" / "workspace").mkdir(parents=True)
    deleted_at = utcnow() - timedelta(hours=1)
    event = ThreadDeleted(thread_id="reused", user_id="ana", deleted_at=deleted_at)
    await bus.publish(bus.subjects.event("thread.deleted"), event)

    async with running_broker(nats_url, config):  # answering: it has caught up
        assert not thread_dir(config, "ana", "gone").exists()
        assert (thread_dir(config, "ana", "kept") / "user-data" / "workspace" / "mine.txt").is_file()
        assert reused.is_dir(), "a directory made after the deletion belongs to the new thread"
        found = await SandboxClient(bus, "ana", "gone").exec("ls")
        assert found.output == ""


async def test_two_brokers_with_their_own_directories_each_delete_their_copy(
    bus: Bus, nats_url: str, make_config: Callable[..., AppConfig], tmp_path: Path
) -> None:
    first = make_config(data_dir=str(tmp_path / "host-a"))
    second = make_config(data_dir=str(tmp_path / "host-b"))
    for config in (first, second):
        workspace = Path(config.sandbox.data_dir or "") / "users" / "ana" / "threads" / "t9" / "user-data"
        (workspace / "workspace").mkdir(parents=True)
        os.utime(workspace.parent, (0, 0))  # made long before the deletion
    async with running_broker(nats_url, first), running_broker(nats_url, second):
        await bus.publish(bus.subjects.event("thread.deleted"), ThreadDeleted(thread_id="t9", user_id="ana"))
        for config in (first, second):
            directory = Path(config.sandbox.data_dir or "") / "users" / "ana" / "threads" / "t9"
            for _ in range(400):
                if not directory.exists():
                    break
                await asyncio.sleep(0.025)
            assert not directory.exists()
