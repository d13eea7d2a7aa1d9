"""Metrics across processes: a component in a process of its own publishes its registry on the bus,
and a reader (the gateway's /metrics, `antler top`) hears it, labelled with that process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import yaml

from bus import Bus
from bus.metrics_feed import MetricsBoard, process_id
from tests.conftest import finished, run_antler
from tests.support.sandbox import exec_once_up


async def command_in_child(bus: Bus) -> None:
    assert (await exec_once_up(bus, "t-metrics")).exit_code == 0  # once the broker in the child answers


def samples_of(board: MetricsBoard, name: str, process: str) -> list[Any]:
    return [
        sample
        for family in board.families(local=False)
        for sample in family.samples
        if sample.name == name and sample.labels.get("process") == process
    ]


async def test_a_component_process_publishes_its_metrics_and_leaves_the_board_when_it_stops(
    bus: Bus, nats_url: str, config_data: dict[str, Any], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    data = {
        **config_data,
        "sandbox": {"provider": "local"},
        "observability": {"metrics_interval_seconds": 0.2},
    }
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    board = MetricsBoard(bus)
    await board.start()
    proc = await run_antler("run", "sandbox", "-c", str(config), "--nats-url", nats_url)
    try:
        await command_in_child(bus)
        child = ""
        for _ in range(200):  # the next snapshot after the command
            child = next((s.process for s in board.live() if s.pid == proc.pid), "")
            if child and samples_of(board, "antler_sandbox_commands_total", child):
                break
            board.changed.clear()
            await asyncio.wait_for(board.changed.wait(), 10)
        assert child, "the child's snapshot came"
        assert child != process_id()
        [done] = samples_of(board, "antler_sandbox_commands_total", child)
        assert (done.labels["outcome"], done.value) == ("ok", 1.0)
        [info] = samples_of(board, "antler_process_info", child)
        assert info.labels["components"] == "sandbox"
        assert samples_of(board, "process_resident_memory_bytes", child), "the process's own collectors"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code, _, err = await finished(proc)
    assert code == 0, err
    for _ in range(200):  # silent for three intervals: gone
        if not any(s.pid == proc.pid for s in board.live()):
            break
        await asyncio.sleep(0.05)
    assert not any(s.pid == proc.pid for s in board.live())
    await board.stop()
