"""Two `antler run wecom` processes: one serves the callback URL and answers, the other stands by;
killed, the active copy's port is taken over by the standby, and WeCom's retries reach it."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import pytest

from tests.channels.conftest import StartCopies
from tests.fakes.openai_server import FakeOpenAI, unfenced
from tests.fakes.wecom_server import FakeWeCom
from tests.support.ports import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(200)]


def listener(procs: list[asyncio.subprocess.Process], port: int) -> asyncio.subprocess.Process:
    """The process listening on the callback port (the active copy)."""
    found = [
        proc
        for proc in procs
        if proc.returncode is None
        and any(
            conn.status == psutil.CONN_LISTEN and conn.laddr.port == port
            for conn in psutil.Process(proc.pid).net_connections(kind="tcp")
        )
    ]
    assert len(found) == 1, f"{len(found)} processes listen on {port}"
    return found[0]


async def test_the_standby_takes_the_callback_over_and_a_retry_is_still_answered_once(
    wecom: FakeWeCom, fake_model: FakeOpenAI, start_copies: StartCopies
) -> None:
    port = free_port()
    async with start_copies("wecom", wecom.settings(port)) as procs:
        await wecom.send_text("before")
        await wecom.wait_for("message/send", timeout=60)
        active = listener(procs, port)
        os.kill(active.pid, signal.SIGKILL)
        await active.wait()
        xml, _ = wecom.message_xml("text", Content="after")
        first = await wecom.deliver(xml)  # refused connections are tried again, as WeCom does
        again = await wecom.deliver(xml)
        assert (first.status_code, again.status_code) == (200, 200)
        assert listener(procs, port) is not active
        await wecom.send_text("last")
        await wecom.wait_for("message/send", count=3, timeout=60)
        asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
        assert asked == ["before", "after", "last"], "each message ran once, the retry nothing"
        assert [s["touser"] for s in wecom.sent] == ["zhangsan"] * 3
