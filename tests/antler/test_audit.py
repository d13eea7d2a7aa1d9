"""`antler audit` as an operator runs it: the tool calls a person's run made (who, which run, the
arguments' digest, never their text) and the calls a guardrail refused, filtered as the API filters;
`--follow` prints a record written after it started."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from access import AuditLog
from bus import Bus
from config import BusConfig
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartStack, ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker


async def test_audit_shows_a_runs_tool_calls_and_refusals_and_follows_new_records(
    bus: Bus,
    bus_config: BusConfig,
    nats_url: str,
    tmp_path: Path,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    start_stack: StartStack,
) -> None:
    config_data["guardrails"] = {"enabled": True, "denied_commands": [r"rm\s+-rf"]}
    config_data["sandbox"] = {"provider": "local"}
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo s3cr3t-words"})], when="go"),
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /mnt/user-data/workspace"})], when="s3cr3t"),
        Reply(text="done", when="not run"),
    )
    async with start_stack(running_runner, running_broker):
        await submit_and_collect(bus, request := ask("t-audit", "go", user_id="ivy"))
    run_id = request.run_id
    args = ("--nats-url", nats_url, "--prefix", bus_config.prefix, "--data-dir", str(tmp_path / "data"))

    code, out, err = await finished(
        await run_antler("audit", "--user", "ivy", "--action", "tool_call", *args)
    )
    assert code == 0, err
    [line] = out.splitlines()
    assert "tool_call  ok  user=ivy" in line
    assert f"run={run_id}" in line
    assert "tool=bash" in line
    assert "args=sha256:" in line
    assert "s3cr3t" not in out  # the arguments' digest only

    code, out, err = await finished(
        await run_antler("audit", "--user", "ivy", "--json", "--since", "1h", *args)
    )
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["action"] for r in records] == ["run_started", "tool_call", "tool_refused"]
    assert records[2]["outcome"] == "refused"
    assert records[2]["detail"]["reason"].startswith("commands matching")

    code, out, err = await finished(await run_antler("audit", "--user", "nobody", *args))
    assert code == 0, err
    assert out.strip() == "no audit records match"
    code, _, err = await finished(await run_antler("audit", "--since", "yesterday", *args))
    assert code == 2
    assert "--since: 'yesterday' is not a time" in err

    audit = AuditLog(bus)
    await audit.record("role_changed", user_id="ivy", actor="ana", detail={"role": "member"})
    follower = await run_antler("audit", "--action", "role_changed", "--follow", "-n", "1", *args)
    assert follower.stdout is not None
    first = await asyncio.wait_for(follower.stdout.readline(), 30)  # the one written before it started
    assert b"role=member" in first
    await audit.record("role_changed", user_id="ivy", actor="ana", detail={"role": "intern"})
    code, out, err = await finished(follower)
    assert code == 0, err
    [line] = out.splitlines()  # only the new one: the one shown already is not shown again
    assert line.endswith("role_changed  ok  user=ivy  by=ana  role=intern")
