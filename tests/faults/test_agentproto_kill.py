"""The agent protocol's durable-execution promise: the runners SIGKILLed while an answer streams to a
protocol client, and the client still reads one complete answer; the tool ran once, and the model
was asked once per step beyond the interrupted one."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import nats
import pytest
import yaml
from synadia_ai.agents import Agents, DiscoverFilter, ResponseChunk

from tests.conftest import finished, run_antler
from tests.fakes.openai_server import Reply, ToolCall
from tests.faults.budget import ONE_AT_A_TIME, TIMEOUT
from tests.faults.conftest import SlowEcho
from tests.faults.harness import UpFactory

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

ANSWER = " ".join(f"word{i}" for i in range(80)) + "."
KILL_AFTER = 8  # response chunks the caller has read when the runners are killed


async def test_runners_killed_mid_answer_the_protocol_client_reads_one_complete_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, echo_model: SlowEcho
) -> None:
    config = fault_config()
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["memory"] = {"enabled": False}  # every model request here is the agent's
    data["agent_protocol"] = {"keepalive_seconds": 0.5}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    up = antler_up(config)
    await up.start()
    code, out, err = await finished(
        await run_antler("creds", "-c", str(config), "--agent-owner", "alice", cwd=up.workdir)
    )
    assert code == 0, err
    context = json.loads(out)
    tool = ToolCall(
        "bash", {"description": "count", "command": "echo ran >> /mnt/user-data/workspace/ran.txt"}
    )
    echo_model.script(
        Reply(tool_calls=[tool], when="KILL-TEST"),
        Reply(text=ANSWER, chunk_delay=0.1),  # the answer step, killed mid-stream
        Reply(text=ANSWER, chunk_delay=0.02),  # the same step, resumed by another runner
    )
    nc = await nats.connect(context["url"], user=context["user"], password=context["password"])
    agents = Agents(nc=nc)
    try:
        found = []
        for _ in range(100):
            found = await agents.discover(filter=DiscoverFilter(agent="antler", owner="alice"))
            if found:
                break
        assert found, "alice's agent was never discovered"
        texts: list[str] = []
        killed = []
        async for message in found[0].prompt("KILL-TEST: count, then talk"):
            if isinstance(message, ResponseChunk):
                texts.append(message.text)
                if len(texts) == KILL_AFTER and not killed:
                    killed = up.runners()
                    for runner in killed:
                        os.kill(runner.pid, signal.SIGKILL)
    finally:
        await agents.close()
        await nc.close()

    assert killed, "the answer ended before the runners could be killed"
    assert "".join(texts) == ANSWER
    ran = list((up.data_dir).rglob("ran.txt"))
    assert [p.read_text() for p in ran] == ["ran\n"], "the tool ran once"
    asked = [r for r in echo_model.agent_requests if "KILL-TEST" in json.dumps(r["messages"])]
    assert len(asked) == 3, "the tool step once, the answer step twice (the interrupted one again)"
    assert await up.stop(60) == 0
