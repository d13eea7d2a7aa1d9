"""`antler top`: the running installation at a glance, from the bus alone, refreshed in place.

What it reads, all of it from NATS (so it works against any deployment it can log in to):
- every process's metrics snapshot (`bus.metrics_feed`): which processes run which components,
  their CPU and memory, runs running, messages in hand, and the counters rates are made of; and
  the components that are not well (`bus.health`: unhealthy or degraded, and why);
- each durable's JetStream counts (pending, unsettled, redelivered): the queues;
- the `runs` KV bucket, watched: runs in flight (pending or running, with their age) and the
  slowest of the turns that ended while it watched.

A frame is plain text (`frame`); the command redraws it every `--interval` seconds until Ctrl-C,
or prints one and exits with `--once` (for scripts and a quick look).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from antler._common import load, login, nats_url, setup_logging
from bus import Bus, stop_on_signals
from bus.health import summarize
from bus.messages import MetricsSnapshot, RunRecord, decode
from bus.metrics_feed import MetricsBoard, consumer_families
from bus.tasks import wait_for

CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen
RECENT = 200  # ended runs kept for "slowest recent turns"
SHOWN = 8  # rows of runs in flight and of slow turns

# Rates shown, each the sum of these counters' growth per second (over every process).
RATES: dict[str, tuple[str, ...]] = {
    "turns": ("antler_runs_finished_total",),
    "model calls": ("gen_ai_client_operation_duration_seconds_count",),
    "tool calls": ("antler_tool_calls_total",),
    "commands": ("antler_sandbox_commands_total",),
    "replies": ("antler_chat_replies_total",),
}
ERRORS: dict[str, tuple[str, dict[str, str]]] = {
    "runs failed": ("antler_runs_finished_total", {"outcome": "error"}),
    "runs timed out": ("antler_runs_finished_total", {"outcome": "timeout"}),
    "tool errors": ("antler_tool_calls_total", {"outcome": "error"}),
    "dead letters": ("antler_dead_letters_total", {}),
    "replies failed": ("antler_chat_replies_total", {"outcome": "failed"}),
    "sandbox refusals": ("antler_sandbox_refusals_total", {}),
}

Samples = dict[str, list[tuple[dict[str, str], float]]]  # sample name -> (labels, value)


@dataclass
class Ended:
    run_id: str
    thread_id: str
    status: str
    seconds: float


@dataclass
class Top:
    """What `antler top` knows between frames."""

    board: MetricsBoard
    in_flight: dict[str, RunRecord] = field(default_factory=dict)
    ended: list[Ended] = field(default_factory=list)
    last: tuple[float, Samples] | None = None  # the previous frame's samples (for rates)

    def on_run(self, record: RunRecord) -> None:
        if not record.status.finished:
            self.in_flight[record.run_id] = record
            return
        if self.in_flight.pop(record.run_id, None) is not None and record.started_at and record.ended_at:
            took = (record.ended_at - record.started_at).total_seconds()
            self.ended = [
                *self.ended[-(RECENT - 1) :],
                Ended(record.run_id, record.thread_id, record.status.value, took),
            ]

    def forget(self, run_id: str) -> None:
        self.in_flight.pop(run_id, None)


def samples_of(snapshots: Iterable[Any]) -> tuple[Samples, dict[str, Samples]]:
    """Every sample summed over processes, and each process's own (by process)."""
    total: Samples = {}
    per_process: dict[str, Samples] = {}
    for family in snapshots:
        for sample in family.samples:
            process = sample.labels.get("process", "")
            labels = {k: v for k, v in sample.labels.items() if k != "process"}
            total.setdefault(sample.name, []).append((labels, sample.value))
            per_process.setdefault(process, {}).setdefault(sample.name, []).append((labels, sample.value))
    return total, per_process


def value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for have, v in samples.get(name, []) if labels.items() <= have.items())


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _row(cells: Iterable[tuple[object, int]]) -> str:
    """Cells by width: a negative width aligns left, a positive one right."""
    return " ".join(f"{str(c)[: abs(w)]:<{-w}}" if w < 0 else f"{str(c)[:w]:>{w}}" for c, w in cells)


PROCESS_COLUMNS = (("PROCESS", -28), ("COMPONENTS", -34), ("UP", 6), ("CPU%", 6), ("RSS MB", 7), ("RUNS", 5))
QUEUE_COLUMNS = (("QUEUE (stream/durable)", -44), ("PENDING", 8), ("UNSETTLED", 10), ("REDELIVERED", 12))
RUN_COLUMNS = (("RUN", -38), ("THREAD", -38), ("STATUS", -8))
HEALTH_COLUMNS = (("COMPONENT", -14), ("HEALTH", -10), ("WHY", -120))


def frame(
    top: Top,
    snapshots: list[MetricsSnapshot],
    families: list[Any],
    queues: list[Any],
    *,
    now: float,
    width: int,
) -> str:
    """One screen of text (pure but for the clock: the command draws it, tests read it)."""
    total, per_process = samples_of(families)
    queue_samples, _ = samples_of(queues)
    previous = top.last[1] if top.last else {}
    elapsed = now - top.last[0] if top.last else 0.0
    lines = [f"antler top — {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC — {len(snapshots)} process(es)", ""]
    lines.append(_row([*PROCESS_COLUMNS, ("MSGS", 5)]))
    for snap in snapshots:
        own = per_process.get(snap.process, {})
        cpu, before = "", per_process_cpu(previous, snap.process)
        if elapsed > 0 and before is not None:
            cpu = f"{max(value(own, 'process_cpu_seconds_total') - before, 0.0) / elapsed * 100:.0f}"
        up = _age((datetime.now(UTC) - snap.started_at).total_seconds())
        rss = f"{value(own, 'process_resident_memory_bytes') / 1e6:.0f}"
        cells = [
            snap.process,
            ",".join(snap.components),
            up,
            cpu,
            rss,
            f"{value(own, 'antler_runs_running'):.0f}",
        ]
        in_hand = f"{value(own, 'antler_consumer_in_flight_messages'):.0f}"
        lines.append(_row([*zip(cells, (w for _, w in PROCESS_COLUMNS), strict=True), (in_hand, 5)]))
    unwell = [(n, s) for n, s in summarize(snapshots).items() if s.status in ("unhealthy", "degraded")]
    if unwell:
        lines += ["", _row(HEALTH_COLUMNS)]
        lines += [
            _row(zip((n, s.status, s.text), (w for _, w in HEALTH_COLUMNS), strict=True)) for n, s in unwell
        ]
    elif snapshots:
        lines += ["", "HEALTH  every component is well"]
    lines += ["", _row(QUEUE_COLUMNS)]
    for labels, pending in queue_samples.get("antler_consumer_pending_messages", []):
        key = {"stream": labels["stream"], "durable": labels["durable"]}
        cells = [
            f"{labels['stream']}/{labels['durable']}",
            f"{pending:.0f}",
            f"{value(queue_samples, 'antler_consumer_ack_pending_messages', **key):.0f}",
            f"{value(queue_samples, 'antler_consumer_redelivered_messages', **key):.0f}",
        ]
        lines.append(_row(zip(cells, (w for _, w in QUEUE_COLUMNS), strict=True)))
    rates = []
    for label, names in RATES.items():
        grew = max(sum(value(total, n) - value(previous, n) for n in names), 0.0)
        rates.append(f"{label} {grew / elapsed:.1f}/s" if elapsed > 0 else f"{label} -")
    errors = [f"{label} {value(total, name, **labels):.0f}" for label, (name, labels) in ERRORS.items()]
    lines += [
        "",
        "RATES   " + "  ".join(rates),
        "ERRORS  " + "  ".join(errors) + "  (since each process started)",
    ]
    lines += ["", f"RUNS IN FLIGHT ({len(top.in_flight)})", _row([*RUN_COLUMNS, ("AGE", 6)])]
    for record in sorted(top.in_flight.values(), key=lambda r: r.created_at)[:SHOWN]:
        age = _age((datetime.now(UTC) - (record.started_at or record.created_at)).total_seconds())
        cells = [record.run_id, record.thread_id, record.status.value]
        lines.append(_row([*zip(cells, (w for _, w in RUN_COLUMNS), strict=True), (age, 6)]))
    lines += ["", "SLOWEST RECENT TURNS", _row([*RUN_COLUMNS, ("TOOK", 6)])]
    for ended in sorted(top.ended, key=lambda e: e.seconds, reverse=True)[:SHOWN]:
        cells = [ended.run_id, ended.thread_id, ended.status]
        lines.append(_row([*zip(cells, (w for _, w in RUN_COLUMNS), strict=True), (_age(ended.seconds), 6)]))
    cpu_now = {f"cpu:{p}": s.get("process_cpu_seconds_total", []) for p, s in per_process.items()}
    top.last = (now, total | cpu_now)
    return "\n".join(line[:width] for line in lines)


def per_process_cpu(previous: Samples, process: str) -> float | None:
    kept = previous.get(f"cpu:{process}")
    return sum(v for _, v in kept) if kept else None


async def follow_runs(bus: Bus, top: Top) -> None:
    """Keep `top.in_flight` and `top.ended` current from the runs bucket (each run's latest first)."""
    kv = await bus.kv(bus.subjects.runs_bucket)
    watcher = await kv.watchall()
    try:
        async for entry in watcher:
            if entry is None:  # the current values are all in; updates follow
                continue
            if entry.operation in ("DEL", "PURGE") or not entry.value:
                top.forget(entry.key)
                continue
            with contextlib.suppress(Exception):  # a record this version cannot read: left out
                top.on_run(decode(RunRecord, entry.value))
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves KeyWatcher.stop unannotated


async def top(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    bus = await login(config).connect(nats_url(args, config), "antler-top", provision=False)
    board = MetricsBoard(bus)
    state = Top(board)
    await board.start()
    runs = asyncio.create_task(follow_runs(bus, state))
    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        # The first frame waits for every process to have spoken once (one interval).
        wait = max(config.observability.metrics_interval_seconds, 0.1) * 1.2
        first = True
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await wait_for(stop.wait(), wait if first else args.interval)
            first = False
            width = shutil.get_terminal_size((160, 40)).columns
            snapshots = board.live()
            text = frame(
                state,
                snapshots,
                board.families(local=False),
                await consumer_families(bus),
                now=time.monotonic(),
                width=width,
            )
            if args.once:
                print(text, flush=True)
                break
            sys.stdout.write(CLEAR + text + "\n\n(Ctrl-C to quit)\n")
            sys.stdout.flush()
    finally:
        undo()
        runs.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runs
        await board.stop()
        await bus.close()
    return 0
