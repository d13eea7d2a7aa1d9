"""Metrics across processes: each process publishes its registry on the bus; readers merge them.

Why through the bus and not a port per process: Antler's processes come and go (`antler up`'s
runner children, a runner on another machine, a container) and reach each other only through
NATS. A Prometheus that had to find and reach every one of them would need service discovery and
an open port per process; instead every process publishes its registry (`MetricsSnapshot`, core
NATS, `<prefix>.metrics.<component>.<process>`, every `observability.metrics_interval_seconds`),
and one reader serves them all: the gateway's `GET /metrics` (one scrape target), `antler top`.

    feed = MetricsFeed(bus, ["runner"], interval=5.0)   # `bus.runtime.serve` runs one per process
    board = MetricsBoard(bus); await board.start()      # the gateway, `antler top`
    families = board.families(local=True)               # merged, each sample labelled `process`

A process that stops publishing is gone: its series leave the merge after three intervals
(Prometheus treats the counters of a process that comes back as reset, as it does on a restart).
A snapshot also carries the health of the process's components (`bus.health`); when one changes,
the process publishes at once instead of at its next interval, so `/health` follows it closely.
The JetStream side — what waits in each durable, what was redelivered — is read from the server
(`consumer_families`), so it is right even when no process of a component runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from bus.chat_partitions import chat_partitions
from bus.connection import Bus
from bus.errors import EnvelopeError
from bus.messages import ComponentHealth, MetricsSnapshot, decode, encode
from bus.metrics import REGISTRY
from bus.permissions import RIGHTS, per_partition
from bus.tasks import cancel_and_wait, wait_for

log = logging.getLogger(__name__)

STARTED_AT = datetime.now(UTC)
LIVE_INTERVALS = 3  # a process silent for this many of its intervals is gone


def process_id() -> str:
    """This process among the installation's: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


HealthSource = Callable[[], Mapping[str, ComponentHealth]]


def snapshot(
    components: Sequence[str], interval: float, health: HealthSource | None = None
) -> MetricsSnapshot:
    """This process's registry now (a millisecond or so of CPU for a few hundred series)."""
    return MetricsSnapshot(
        health=dict(health()) if health is not None else {},
        process=process_id(),
        host=socket.gethostname(),
        pid=os.getpid(),
        components=list(components),
        started_at=STARTED_AT,
        interval_seconds=interval,
        text=generate_latest(REGISTRY).decode(),
        split_buckets=True,
    )


class MetricsFeed:
    """Publishes this process's registry (and its components' `health`) every `interval` seconds
    until stopped, and at once after `poke()`. Best effort: a publish that fails (the bus away) is
    logged once and tried again next time."""

    def __init__(
        self, bus: Bus, components: Sequence[str], interval: float, health: HealthSource | None = None
    ) -> None:
        self.bus = bus
        self.components = list(components)
        self.interval = interval
        self.health = health
        self.subject = bus.subjects.metrics(
            self.components[0] if self.components else "process", process_id()
        )
        self._task: asyncio.Task[None] | None = None
        self._poked = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def start(self) -> None:
        if self._task is None and self.interval > 0:
            self._task = asyncio.create_task(self._run(), name="metrics-feed")

    def poke(self) -> None:
        """Publish now (something changed); safe from any thread."""
        if threading.get_ident() == self._thread:
            self._poked.set()
        else:
            self._loop.call_soon_threadsafe(self._poked.set)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        failing = False
        while True:
            try:
                # Straight on the connection: no trace context (a snapshot belongs to no one's trace).
                self._poked.clear()
                current = snapshot(self.components, self.interval, self.health)
                await self.bus.nc.publish(self.subject, encode(current))
                failing = False
            except Exception as exc:  # the bus away: the next one goes out once it is back
                if not failing:
                    log.warning("could not publish this process's metrics: %s", exc)
                failing = True
            with contextlib.suppress(TimeoutError):
                await wait_for(self._poked.wait(), self.interval)


@dataclass
class _Heard:
    snapshot: MetricsSnapshot
    at: float  # time.monotonic() when it arrived


class MetricsBoard:
    """The latest snapshot of every live process, heard on `<prefix>.metrics.>`."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._heard: dict[str, _Heard] = {}
        self._sub: Any = None
        self.changed = asyncio.Event()  # set on each snapshot (for `antler top`)

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.metrics_all, cb=self._on_snapshot)

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _on_snapshot(self, msg: Any) -> None:
        try:
            heard = decode(MetricsSnapshot, msg.data)
        except EnvelopeError as exc:
            log.warning("ignoring a metrics snapshot on %s: %s", msg.subject, exc)
            return
        self._heard[heard.process] = _Heard(heard, time.monotonic())
        self.changed.set()

    def live(self) -> list[MetricsSnapshot]:
        """Snapshots of the processes heard from lately, oldest process first."""
        now = time.monotonic()
        for process, heard in list(self._heard.items()):
            if now - heard.at > LIVE_INTERVALS * heard.snapshot.interval_seconds:
                del self._heard[process]
        return sorted((h.snapshot for h in self._heard.values()), key=lambda s: (s.started_at, s.process))

    def families(self, *, local: bool) -> list[Metric]:
        """Every live process's families merged, each sample labelled with its `process`; with
        `local`, this process's registry read directly (fresh) instead of its last snapshot.

        The text is parsed here, at read time: a scrape every few seconds, not every snapshot."""
        own = process_id()
        sources: list[tuple[str, Iterable[Metric]]] = []
        info = GaugeMetricFamily(
            "antler_process_info",
            "Antler processes alive (1), by host, pid and components",
            labels=["process", "host", "pid", "components"],
        )
        if local:
            sources.append((own, REGISTRY.collect()))
            heard = next((s for s in self.live() if s.process == own), None)
            components = ",".join(heard.components) if heard else ""
            info.add_metric([own, socket.gethostname(), str(os.getpid()), components], 1)
        for snap in self.live():
            if local and snap.process == own:
                continue
            try:
                sources.append((snap.process, list(text_string_to_metric_families(snap.text))))
            except ValueError as exc:
                log.warning("ignoring the metrics of process %s: %s", snap.process, exc)
                continue
            info.add_metric([snap.process, snap.host, str(snap.pid), ",".join(snap.components)], 1)
        merged: dict[str, Metric] = {}
        for process, families in sources:
            for family in families:
                target = merged.get(family.name)
                if target is None:
                    target = merged[family.name] = Metric(
                        family.name, family.documentation, family.type, family.unit
                    )
                for sample in family.samples:
                    target.samples.append(sample._replace(labels={**sample.labels, "process": process}))
        return [info, *merged.values()]


async def consumer_families(bus: Bus) -> list[Metric]:
    """What waits in each component's durable, as JetStream counts it (`RIGHTS`' consumers)."""
    labels = ["stream", "durable"]
    pending = GaugeMetricFamily(
        "antler_consumer_pending_messages",
        "Messages in the stream not yet delivered to the durable",
        labels=labels,
    )
    ack_pending = GaugeMetricFamily(
        "antler_consumer_ack_pending_messages",
        "Messages delivered to the durable and not yet settled",
        labels=labels,
    )
    redelivered = GaugeMetricFamily(
        "antler_consumer_redelivered_messages",
        "Messages delivered to the durable more than once and not yet settled",
        labels=labels,
    )
    partitions = await chat_partitions(bus)
    durables = sorted(
        {
            (bus.subjects.stream(kind), durable)
            for r in RIGHTS.values()
            for kind, durable, _ in per_partition(r.consume, partitions)
        }
    )

    async def info_of(stream: str, durable: str) -> Any:
        try:
            return await bus.js.consumer_info(stream, durable, timeout=2.0)
        except Exception:  # not created yet (its component never ran), or the bus is away
            return None

    infos = await asyncio.gather(*(info_of(stream, durable) for stream, durable in durables))
    for (stream, durable), info in zip(durables, infos, strict=True):
        if info is not None:
            pending.add_metric([stream, durable], info.num_pending or 0)
            ack_pending.add_metric([stream, durable], info.num_ack_pending or 0)
            redelivered.add_metric([stream, durable], info.num_redelivered or 0)
    return [pending, ack_pending, redelivered]


def runs_pending(families: Sequence[Metric]) -> GaugeMetricFamily:
    """`antler_runs_pending`: run requests no runner has taken yet (the runner durable's backlog)."""
    family = GaugeMetricFamily("antler_runs_pending", "Runs submitted and not yet taken by a runner")
    waiting = 0.0
    for metric in families:
        if metric.name == "antler_consumer_pending_messages":
            waiting += sum(s.value for s in metric.samples if s.labels.get("durable") == "runner")
    family.add_metric([], waiting)
    return family
