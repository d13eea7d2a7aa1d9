"""The `antler` command as users run it: a real process, real output, real exit codes."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from bus import Bus, Delivery, Reject
from bus.chat_partitions import chat_partitions
from bus.launcher import login
from bus.messages import InboundMessage
from config import AppConfig, BusConfig
from tests.conftest import finished, run_antler
from tests.support.consumers import inbound_consumer
from tests.support.processes import pid_alive
from tests.support.shared_up import GROUP, SharedUp

pytestmark = pytest.mark.asyncio


async def read_url(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line, "antler up ended before printing its NATS URL"
        if line.startswith("NATS: "):
            return line.split(" ", 1)[1].strip()


async def test_antler_up_says_it_is_up_once_every_component_serves_and_stops_cleanly_on_ctrl_c(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text("gateway:\n  port: 0\nrunner:\n  processes: 2\n", encoding="utf-8")
    proc = await run_antler("up", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    try:
        url = await read_url(proc)
        assert url.startswith("nats://127.0.0.1:")
        as_admin = login(AppConfig(bus=BusConfig(data_dir=str(tmp_path / "data"))))  # the admin it made
        bus = await as_admin.connect(url, "test", provision=False)
        info = await bus.js.stream_info(bus.subjects.runs_stream)
        assert info.config.name == "ANTLER_RUNS", "the streams are provisioned"
        await bus.close()
        assert proc.stdout is not None
        # Printed with "Antler is up", once every component is ready: no waiting for anything after it.
        gateway_line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert gateway_line.startswith("Gateway: http://127.0.0.1:")
        gateway_url = gateway_line.split()[1]
        async with httpx.AsyncClient() as http:
            health = (await http.get(f"{gateway_url}/health")).json()
        # No model in this config: every component serves, the runner saying why it cannot answer.
        assert health["status"] == "degraded"
        assert list(health["degraded"]) == ["runner"], health
        assert health["unhealthy"] == {}, health
        assert health["components"] == {
            "gateway": 1,
            "runner": 2,
            "sandbox": 1,
            "subagents": 1,
            "memory": 1,
            "scheduler": 1,
            "router": 1,
        }
        lock_holder = int((tmp_path / "data" / "antler.lock").read_text().split()[1].rstrip(","))
        assert (tmp_path / "data" / "nats.url").read_text().strip() == url

        proc.send_signal(signal.SIGINT)
        code, _, err = await finished(proc)
        server_pid = int(re.search(r"nats-server running \(pid (\d+)", err).group(1))  # type: ignore[union-attr]
    finally:
        if proc.returncode is None:
            proc.kill()
    assert code == 0, err
    console = err
    err += (tmp_path / "data" / "antler.log").read_text(encoding="utf-8")  # the components' routine lines
    listed = "components: runner (x2 processes), subagents, memory, sandbox, scheduler, router, agentproto, "
    listed += "gateway"
    assert listed in err
    # Two runners, forked by one leader that loaded the libraries (runner.fork_processes)
    leaders = [int(pid) for pid in re.findall(r"runner process \d started \(pid (\d+)\)", err)]
    runner_pids = [int(pid) for pid in re.findall(r"runner process \d forked \(pid (\d+)\)", err)]
    assert len(leaders) == 1, err
    assert len(runner_pids) == 2, err
    runner_pids += leaders
    before_up = err[len(console) : err.index("Antler is up", len(console))]  # the log file, in order
    assert before_up.count("runner: ready") == 2, "both runner processes took work before 'Antler is up'"
    assert not any(pid_alive(pid) for pid in runner_pids), "the runner processes stopped with antler up"
    assert "stopped" in console
    assert "Traceback" not in err
    assert not (tmp_path / "data" / "nats.url").exists()
    assert lock_holder == proc.pid
    assert not pid_alive(server_pid), "the embedded nats-server is gone"


@pytest.mark.xdist_group(GROUP)
@pytest.mark.asyncio(loop_scope="session")  # SHARED_UP
async def test_a_second_antler_up_on_the_same_data_dir_refuses_clearly(shared_up: SharedUp) -> None:
    """On the shared stack; that it still stops cleanly (on SIGTERM) is checked when that stops."""
    data_dir = str(shared_up.data_dir)
    second = await run_antler("up", "--data-dir", data_dir, cwd=shared_up.workdir)
    code, _, err = await finished(second)
    assert code == 1
    assert "in use by another Antler" in err
    assert "Traceback" not in err
    # The refused one left the running one as it was: found and reachable from that directory.
    assert (shared_up.data_dir / "nats.url").read_text().strip() == shared_up.nats_url
    send = await run_antler(
        "send", "--data-dir", data_dir, "--no-wait", "--chat", "second-up", "ping", cwd=shared_up.workdir
    )
    code, _, err = await finished(send)
    assert code == 0, err
    assert shared_up.up.proc is not None
    assert shared_up.up.proc.returncode is None, "the running one still runs"


async def test_schema_output_validates_a_sample_envelope_and_rejects_a_bad_one(tmp_path: Path) -> None:
    proc = await run_antler("schema")
    code, out, err = await finished(proc)
    assert code == 0, err
    schemas = json.loads(out)
    inbound = schemas["InboundMessage"]
    jsonschema.validate({"channel": "cli", "chat_id": "me", "text": "hello"}, inbound)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"channel": "cli", "text": "no chat id"}, inbound)
    jsonschema.validate({"thread_id": "t", "input": {"messages": []}}, schemas["RunRequest"])

    proc = await run_antler("schema", "RunEvent", "--out", str(tmp_path))
    code, out, err = await finished(proc)
    assert code == 0, err
    assert json.loads((tmp_path / "RunEvent.schema.json").read_text())["title"] == "RunEvent"


async def test_run_with_an_unknown_component_says_what_exists(nats_url: str) -> None:
    proc = await run_antler("run", "no-such-thing", "--nats-url", nats_url)
    code, _, err = await finished(proc)
    assert code == 2
    assert "unknown component 'no-such-thing'" in err


async def test_commands_without_a_nats_say_how_to_get_one(tmp_path: Path) -> None:
    proc = await run_antler("dlq", "list", cwd=tmp_path, env={"ANTLER_NATS_URL": ""})
    code, _, err = await finished(proc)
    assert code == 2
    assert "start `antler up`" in err


async def test_an_unreachable_nats_is_one_clear_line(tmp_path: Path) -> None:
    proc = await run_antler("tail", "--nats-url", "nats://127.0.0.1:1", cwd=tmp_path)
    code, _, err = await finished(proc)
    assert code == 1
    assert "cannot connect to NATS at nats://127.0.0.1:1" in err
    assert "Traceback" not in err


async def test_a_bad_config_file_is_reported_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("bus:\n  prefix: a.b\n", encoding="utf-8")
    proc = await run_antler("up", cwd=tmp_path)
    code, _, err = await finished(proc)
    assert code == 1
    assert "config.yaml: 1 invalid field" in err
    assert "bus.prefix" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [
        "up",
        "run",
        "send",
        "tail",
        "schema",
        "dlq",
        "dlq list",
        "dlq replay",
        "bench",
        "user add",
        "sandbox doctor",
        "audit",
    ],
)
async def test_every_command_has_help(command: str) -> None:
    proc = await run_antler(*command.split(), "--help")
    code, out, _ = await finished(proc)
    assert code == 0
    assert "usage: antler" in out
    assert len(out.splitlines()) > 3


async def test_dlq_list_show_and_replay(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path
) -> None:
    s = bus.subjects
    fail = True
    recovered = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        if fail:
            raise Reject("cannot handle this yet")
        recovered.set()

    args = ("--nats-url", nats_url, "--prefix", bus_config.prefix, "--data-dir", str(tmp_path / "data"))
    consumer = inbound_consumer(bus, handle, "cli")
    async with consumer:
        dead = asyncio.Event()

        async def on_dlq(msg: object) -> None:
            dead.set()

        await bus.nc.subscribe(s.dlq_all, cb=on_dlq)
        await bus.publish(
            s.chat_in("cli", "c"), InboundMessage(channel="cli", chat_id="c", text="needs care")
        )
        await asyncio.wait_for(dead.wait(), 10)

        code, out, err = await finished(await run_antler("dlq", "list", *args))
        assert code == 0, err
        assert "rejected: cannot handle this yet" in out
        assert s.chat_in("cli", "c") in out
        seq = int(out.splitlines()[1].split()[0])

        code, out, err = await finished(await run_antler("dlq", "show", str(seq), *args))
        assert code == 0, err
        assert "Antler-Dlq-Reason: rejected: cannot handle this yet" in out
        assert '"text": "needs care"' in out

        fail = False
        code, out, err = await finished(await run_antler("dlq", "replay", str(seq), *args))
        assert code == 0, err
        assert "replayed 1 message(s)" in out
        await asyncio.wait_for(recovered.wait(), 10)

    code, out, _ = await finished(await run_antler("dlq", "list", *args))
    assert "empty" in out


async def test_tail_prints_matching_traffic_readably(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path
) -> None:
    proc = await run_antler(
        "tail",
        "chat.in.>",
        "-n",
        "1",
        "--nats-url",
        nats_url,
        "--prefix",
        bus_config.prefix,
        "--data-dir",
        str(tmp_path / "data"),
        env={"COLUMNS": "200"},  # lines are cut to the terminal's width (pytest-xdist workers say 80)
    )
    assert proc.stderr is not None
    banner = await asyncio.wait_for(proc.stderr.readline(), 30)
    assert b"tailing" in banner
    await bus.publish(
        bus.subjects.chat_in("cli", "c9"), InboundMessage(channel="cli", chat_id="c9", text="watch me")
    )
    code, out, err = await finished(proc)
    assert code == 0, err
    assert bus.subjects.chat_in("cli", "c9") in out
    assert '"text": "watch me"' in out
    # What the message is comes first, before its body and ids.
    assert out.index("channel=cli chat_id=c9") < out.index('"text": "watch me"')


async def test_send_prints_the_reply_of_whatever_answers_the_chat(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path
) -> None:
    # The echo is no component of ours (not in bus.permissions.RIGHTS): it runs as the stack's admin.
    args = ("--nats-url", nats_url, "--prefix", bus_config.prefix, "--data-dir", str(tmp_path / "data"))
    echo = await run_antler("run", "tests.components.slow_echo:run", *args)
    try:
        proc = await run_antler("send", "0.1", "--chat", "terminal-1", *args)
        code, out, err = await finished(proc)
    finally:
        echo.send_signal(signal.SIGTERM)
        await finished(echo)
    assert code == 0, err
    assert out.split() == ["started", "done"], "partial text streamed, then the final reply"


async def test_send_without_anyone_answering_times_out_with_a_hint(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path
) -> None:
    data_dir = str(tmp_path / "data")
    proc = await run_antler(
        "send",
        "hello?",
        "--timeout",
        "0.5",
        "--nats-url",
        nats_url,
        "--prefix",
        bus_config.prefix,
        "--data-dir",
        data_dir,
    )
    code, _, err = await finished(proc)
    assert code == 3
    assert "is the router running?" in err
    waiting = [
        (await bus.js.stream_info(bus.subjects.chat_in_partition_stream(k))).state.messages
        for k in range(await chat_partitions(bus))
    ]
    assert sum(waiting) == 1, "the message itself waits on the bus for the router"


async def test_bench_outside_a_checkout_says_where_to_run_it(tmp_path: Path) -> None:
    code, _, err = await finished(await run_antler("bench", "--repo", str(tmp_path), cwd=tmp_path))
    assert code == 2
    assert "run antler bench from the repository" in err


async def test_up_starts_exactly_the_chat_platforms_that_are_enabled(
    config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> None:
    from antler.up import enabled_components

    config_data["channels"] = {"slack": {"enabled": True}, "feishu": {"enabled": True}}
    started = set(enabled_components(app_config()))
    assert {"runner", "sandbox", "router", "slack", "feishu"} <= started
    assert not {"telegram", "dingtalk"} & started
