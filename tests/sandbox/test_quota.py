"""A thread's disk quota and /tmp: a command over them is stopped or refused with a clear message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from config import AppConfig
from sandbox import SandboxClient, TooLarge
from tests.support.sandbox import needs_bwrap, running_broker

pytestmark = pytest.mark.asyncio

WS = "/mnt/user-data/workspace"


@pytest_asyncio.fixture
async def small_broker(
    nats_url: str, make_config: Callable[..., AppConfig], provider: str
) -> AsyncIterator[AppConfig]:
    config = make_config(provider=provider, max_thread_mb=2, max_write_bytes=3_000_000)
    async with running_broker(nats_url, config):
        yield config


async def test_a_command_filling_the_thread_past_its_quota_is_stopped_and_writes_are_refused(
    client: SandboxClient, small_broker: AppConfig
) -> None:
    with pytest.raises(
        TooLarge, match=r"the command was stopped: this thread's files take .* MB, over its quota of 2 MB"
    ):
        await client.exec("head -c 3000000 /dev/urandom > big.bin; sleep 60", timeout=60)
    with pytest.raises(TooLarge, match="over its quota of 2 MB"):
        await client.write_file(f"{WS}/more.txt", "x")
    # Deleting is what the model is told to do, and it works.
    assert (await client.exec("rm big.bin && echo freed")).output == "freed\n"
    await client.write_file(f"{WS}/more.txt", "x")


async def test_a_command_that_ends_over_the_quota_says_so(
    client: SandboxClient, small_broker: AppConfig
) -> None:
    reply = await client.exec("head -c 3000000 /dev/urandom > big.bin && echo written")
    assert reply.output == "written\n"
    assert any("over its quota of 2 MB" in warning for warning in reply.warnings)


@needs_bwrap
async def test_bwrap_tmp_is_on_the_threads_disk_and_counts_toward_its_quota(
    bus: object, nats_url: str, make_config: Callable[..., AppConfig], client: SandboxClient
) -> None:
    config = make_config(provider="bwrap", max_thread_mb=2)
    async with running_broker(nats_url, config):
        with pytest.raises(TooLarge, match="the command was stopped"):
            await client.exec("head -c 3000000 /dev/urandom > /tmp/fill; sleep 60", timeout=60)
        # Each command gets a fresh /tmp, gone when it ends: nothing is left over the quota.
        assert (await client.exec("ls -A /tmp; echo end")).output == "end\n"
        # A thread already over its quota runs commands that cannot grow files, but can delete them.
        await client.exec("head -c 3000000 /dev/urandom > big.bin")
        grown = await client.exec("echo more > more.txt")
        assert grown.exit_code != 0
        assert (await client.exec("rm big.bin && echo removed")).output == "removed\n"
        assert (await client.exec("echo more > more.txt && cat more.txt")).output == "more\n"
