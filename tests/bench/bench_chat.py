"""The chat path end to end: what a chat user waits for.

A turn = publish an InboundMessage on `<prefix>.chat.in.bench`; the router (its
own process) binds the chat to a thread and submits the run; a runner (two
processes, as `antler up` starts them on two cores) runs the lead agent against a
scripted model over HTTP; the router's projection turns the run's events into
replies; the turn ends when the final OutboundMessage arrives on
`<prefix>.chat.out.bench`.

The model streams as a real one does by default (`--model paced`: the first token after
`--first-token-ms`, then one every `--token-interval-ms`, `--answer-tokens` in all), and every
latency is also given as the wait beyond the model's own time (answer and first token).
`--model instant` answers at once (everything in one or two reads): framework overhead alone.
Per level: run events stored and messages the nats-server took in (its /varz), per turn, and the
stack's peak summed RSS and PSS.

Printed: the machine (cores, load), single-turn latency (a chat's first message,
which also creates its thread and a title, and a follow-up), the bus traffic of one
turn (KV reads and writes by bucket, run events, acks ...; counted on turns of their
own, since this process also serves the model; `--timeline` prints one turn's
messages with their times, and for the slowest single turns where their time
went hop by hop, beside the median turn), then for 10/50/200
chats at once p50/p90/p99 latency, turns/s and the CPU seconds each process used.
`--json out.json` keeps the figures; `--compare old.json` prints them side by side.

Run: `antler bench chat [--levels 10,50,200] [--repeat 3] [--json out.json] [--cluster 3]`
(`--cluster 3`: three nats-servers clustered on this machine, R3, each node's CPU share per level and
which node leads which stream and bucket).
With ANTLER_BENCH_PYSPY=out.txt (and py-spy installed) runner 1 is sampled meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from antler.pool import process_count
from bus import Bus, decode
from bus.chat_partitions import chat_partitions, publish_inbound
from bus.messages import InboundMessage, OutboundMessage, RunControl
from channels.router import RUN_NAMESPACE
from tests.bench.stack import BenchStack, bench_stack, run_as_script, sample_with_pyspy, with_defaults
from tests.fakes.openai_server import Pace

REPO = Path(__file__).resolve().parents[2]
CHANNEL = "bench"
TURN_TIMEOUT = 120.0


# ---------------------------------------------------------------------------- one turn


@dataclass
class Turn:
    latency: float  # publish -> final reply
    first_reply: float | None  # publish -> first partial reply (None: the final came first)
    kind: str
    model_s: float = 0.0  # the model's own time for the answer (paced model), 0 if instant


@dataclass
class _Waiting:
    started: float
    done: asyncio.Future[str]
    first_reply: float | None = None


class ChatClient:
    """Sends chat messages as an adapter would and waits for each one's final reply."""

    def __init__(self, bus: Bus, pace: Pace | None = None, follow: bool = False) -> None:
        self.bus = bus
        self.pace = pace
        # Each turn's run followed live, as a web UI would follow it: `RunControl` `follow` (the
        # runner sends its text live), without the reader's own cost (no subscription).
        self.follow = follow
        self._waiting: dict[str, _Waiting] = {}
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.chat_out(CHANNEL), cb=self._on_reply)

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def _on_reply(self, msg: Any) -> None:
        reply = decode(OutboundMessage, msg.data)
        waiting = self._waiting.get(reply.reply_to or "")
        if waiting is None or waiting.done.done():
            return
        if reply.kind == "partial":
            if waiting.first_reply is None:
                waiting.first_reply = time.perf_counter() - waiting.started
            return
        waiting.done.set_result(reply.kind if reply.kind != "error" else f"error: {reply.text}")

    async def turn(self, chat_id: str, text: str, timeout: float = TURN_TIMEOUT) -> Turn:
        message = InboundMessage(channel=CHANNEL, chat_id=chat_id, user_id=chat_id, text=text)
        waiting = _Waiting(time.perf_counter(), asyncio.get_running_loop().create_future())
        self._waiting[message.message_id] = waiting
        try:
            if self.follow:  # before the message: the runner has it when it takes the run
                run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
                follow = RunControl(run_id=run_id, action="follow")
                await self.bus.publish_core(self.bus.subjects.run_control(run_id), follow)
            await publish_inbound(self.bus, CHANNEL, message)
            kind = await asyncio.wait_for(waiting.done, timeout)
        finally:
            self._waiting.pop(message.message_id, None)
        if kind != "final":
            raise RuntimeError(f"chat {chat_id}: the turn ended with {kind}")
        # The model echoes the message after "You said:", a word a token.
        model_s = self.pace.seconds(2 + len(text.split())) if self.pace is not None else 0.0
        return Turn(time.perf_counter() - waiting.started, waiting.first_reply, kind, model_s)


# ---------------------------------------------------------------------------- bus traffic


class TrafficCounter:
    """Counts every message on the bus by what it is (a KV read of `runs`, a run event, an ack ...).

    A KV read is a request on `$JS.API.DIRECT.GET.KV_<bucket>`, a KV write a publish on
    `$KV.<bucket>.<key>`: both are seen by any subscriber of the account.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.counts: collections.Counter[str] = collections.Counter()
        self.keep_timeline = False
        self.timeline: list[tuple[float, str, str, int]] = []  # (when, what, subject, bytes)
        self._subs: list[Any] = []

    async def start(self) -> None:
        for pattern in ("$JS.>", "$KV.>", f"{self.bus.subjects.prefix}.>"):
            self._subs.append(await self.bus.nc.subscribe(pattern, cb=self._on_msg))

    async def stop(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()
        self._subs = []

    def snapshot(self) -> collections.Counter[str]:
        return collections.Counter(self.counts)

    async def _on_msg(self, msg: Any) -> None:
        kind = self.classify(msg.subject, msg.data)
        if self.keep_timeline:
            self.timeline.append((time.perf_counter(), kind or msg.subject, msg.subject, len(msg.data)))
        if kind:
            self.counts[kind] += 1

    def classify(self, subject: str, data: bytes) -> str | None:
        prefix = self.bus.subjects.prefix
        bucket_prefix = f"KV_{prefix}_"
        parts = subject.split(".")
        if parts[0] == "$KV" and len(parts) > 1:
            return f"kv write {parts[1].removeprefix(prefix + '_')}"
        if subject.startswith(("$JS.API.DIRECT.GET.", "$JS.API.STREAM.MSG.GET.")):
            stream = parts[4] if subject.startswith("$JS.API.DIRECT") else parts[5]
            if stream.startswith(bucket_prefix):
                return f"kv read {stream.removeprefix(bucket_prefix)}"
            return f"stream read {stream}"
        if subject.startswith("$JS.API.CONSUMER.MSG.NEXT."):
            return f"fetch {_durable(parts[-1])}"
        if subject.startswith("$JS.ACK."):
            durable = _durable(parts[3]) if len(parts) > 3 else "?"
            what = "in-progress" if data.startswith(b"+WPI") else "settle"
            return f"{what} {durable}"
        if subject.startswith("$JS.API."):
            return "js api " + ".".join(p for p in parts[2:4])
        if subject.startswith("$JS."):
            return None  # advisories and flow control
        rest = subject.removeprefix(prefix + ".")
        if rest.startswith("runs.ev."):
            return "run event"
        if rest.startswith("runs.live."):
            return "run live delta"
        if rest.startswith("runs.ctl."):
            return "run control"
        if rest.startswith(("chat.in.", "chat.out.", "memory.update.")):
            return ".".join(rest.split(".")[:2])
        return rest


class HopRecorder:
    """When each hop of a turn first happened: chat.in stored, the router's ack, the run request,
    each kind of run event, the first partial and the final reply, the runner's ack.

    Kept for every single turn (only with `--timeline`: it loads this process a little), so the
    slowest turns of a run can be taken apart afterwards, hop by hop.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.seen: list[tuple[float, str]] = []
        self._subs: list[Any] = []

    async def start(self) -> None:
        for pattern in (f"{self.bus.subjects.prefix}.>", "$JS.ACK.>"):
            self._subs.append(await self.bus.nc.subscribe(pattern, cb=self._on_msg))

    async def stop(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()
        self._subs = []

    async def _on_msg(self, msg: Any) -> None:
        self.seen.append((time.perf_counter(), self.hop(msg.subject, msg.data)))

    def hop(self, subject: str, data: bytes) -> str:
        if subject.startswith("$JS.ACK."):
            parts = subject.split(".")
            what = "in-progress" if data.startswith(b"+WPI") else "settled"
            return f"{what} by {parts[3] if len(parts) > 3 else '?'}"
        rest = subject.removeprefix(self.bus.subjects.prefix + ".")
        try:
            if rest.startswith("runs.ev."):
                return f"run event {json.loads(data).get('event', '?')}"
            if rest.startswith("runs.live."):
                return "run live delta"
            if rest.startswith("chat.out."):
                return f"chat.out {json.loads(data).get('kind', '?')}"
        except ValueError:
            pass
        return ".".join(rest.split(".")[:2])

    def milestones(self, sent: float, ended: float) -> list[tuple[str, float]]:
        """Each hop's first time in (sent, ended], in ms since the message was sent."""
        first: dict[str, float] = {}
        for at, hop in self.seen:
            if sent <= at <= ended and hop not in first:
                first[hop] = 1000 * (at - sent)
        return sorted(first.items(), key=lambda item: item[1])


def print_hops(label: str, total_ms: float, milestones: list[tuple[str, float]]) -> None:
    """One turn hop by hop: when each hop first happened and how long since the one before."""
    gaps = [
        at - before for (_, before), (_, at) in zip([("sent", 0.0), *milestones], milestones, strict=False)
    ]
    widest = max(gaps, default=0.0)
    print(f"  {label}: {total_ms:.1f} ms")
    for (hop, at), gap in zip(milestones, gaps, strict=True):
        mark = "  <- longest hop" if gap == widest and gap > 0 else ""
        print(f"    {at:8.1f} ms  +{gap:7.1f}  {hop}{mark}")
    last = milestones[-1][1] if milestones else 0.0
    print(f"    {total_ms:8.1f} ms  +{total_ms - last:7.1f}  final reply here")


SLOWEST_SHOWN = 3


def print_slowest_turns(turns: list[tuple[str, Turn, float]], recorder: HopRecorder) -> None:
    """The slowest few single turns of the run, hop by hop, after the median turn for comparison."""
    if not turns:
        return
    ranked = sorted(turns, key=lambda t: t[1].latency)
    median = ranked[len(ranked) // 2]
    print(f"where the time went, hop by hop (ms since the message was sent; {len(turns)} single turns):")
    for label, (name, turn, sent) in [
        ("median turn", median),
        *((f"slowest #{i + 1}", t) for i, t in enumerate(reversed(ranked[-SLOWEST_SHOWN:]))),
    ]:
        print_hops(f"{label} ({name})", 1000 * turn.latency, recorder.milestones(sent, sent + turn.latency))


# ---------------------------------------------------------------------------- processes


class Processes:
    """The processes whose CPU time is counted."""

    def __init__(self) -> None:
        self.procs: dict[str, psutil.Process] = {}

    def add(self, name: str, pid: int) -> None:
        self.procs[name] = psutil.Process(pid)

    def cpu(self) -> dict[str, float]:
        seconds = {}
        for name, proc in self.procs.items():
            try:
                times = proc.cpu_times()
                seconds[name] = times.user + times.system
            except psutil.Error:
                seconds[name] = 0.0
        return seconds


def machine_cpu_busy() -> float:
    """CPU seconds the whole machine has spent busy so far (every core, every process)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model or platform.processor(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------- figures


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


@dataclass
class Level:
    chats: int
    turns: int
    seconds: float
    turns_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    first_reply_p50_ms: float | None
    cpu_s: dict[str, float]
    cores_used: float  # by the processes above
    others_cores: float  # by everything else on the machine meanwhile
    load_average: list[float] = field(default_factory=list)
    beyond_model_p50_ms: float | None = None  # latency minus the model's own time
    beyond_model_p99_ms: float | None = None
    first_beyond_model_p50_ms: float | None = None  # first partial minus the time to first token
    # Beyond the model, apart: each chat's first turn (every chat starts at once: a burst of new
    # chats, which also end together) and the turns after it.
    opening_beyond_model_p50_ms: float | None = None
    later_beyond_model_p50_ms: float | None = None
    later_beyond_model_p99_ms: float | None = None
    run_events_per_turn: float | None = None  # stored in the run-events stream
    live_deltas_per_turn: float | None = None  # streamed text sent live (core NATS, not stored)
    bus_messages_per_turn: float | None = None  # messages the nats-server took in
    peak_rss_mb: float | None = None  # the stack's summed RSS / PSS, sampled every second
    peak_pss_mb: float | None = None
    # A cluster: messages stored during the level in the streams and buckets each node led (every
    # write goes through its stream's leader: it orders it, replicates it and answers the writer).
    leader_writes: dict[str, int] | None = None
    # The same for the buckets every turn writes (threads, runs, thread_runs), and per stream.
    bucket_leader_writes: dict[str, int] | None = None
    stream_writes: dict[str, tuple[str, int]] | None = None


class MemorySampler:
    """The stack's summed RSS and PSS, sampled every second in a thread; the peaks are kept."""

    def __init__(self, processes: Processes) -> None:
        self.pids = [p.pid for name, p in processes.procs.items() if name != "bench+model"]
        self.peak_rss = self.peak_pss = 0.0
        self._task: asyncio.Task[None] | None = None

    def _sample(self) -> tuple[float, float]:
        rss = pss = 0
        for pid in self.pids:
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
            except OSError:
                pass
        return rss / 1024, pss / 1024

    async def _run(self) -> None:
        while True:
            rss, pss = await asyncio.to_thread(self._sample)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            await asyncio.sleep(1.0)

    def __enter__(self) -> MemorySampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def stored_run_events(stack: BenchStack) -> int:
    s, total = stack.bus.subjects, 0
    for k in range(await chat_partitions(stack.bus)):
        total += (await stack.bus.js.stream_info(s.run_events_partition_stream(k))).state.messages
    return total


async def run_level(
    client: ChatClient,
    processes: Processes,
    chats: int,
    turns: int,
    text: str,
    tag: str,
    stack: BenchStack | None = None,
) -> Level:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(turns):
        queue.put_nowait(i)
    done: list[Turn] = []
    opening: list[Turn] = []  # each chat's first turn: all sent at once, a burst of new chats

    async def chat(n: int) -> None:
        first = True
        while not queue.empty():
            i = queue.get_nowait()
            turn = await client.turn(f"{tag}-{n}", f"{text} ({i})")
            done.append(turn)
            if first:
                opening.append(turn)
                first = False

    led_before = await stored_by_leader(stack) if stack is not None and stack.nodes else None
    events_before = await stored_run_events(stack) if stack else 0
    msgs_before = (await stack.varz())["in_msgs"] if stack else 0
    live = [0]

    async def count_live(_: Any) -> None:
        live[0] += 1

    live_sub = (
        await stack.bus.nc.subscribe(f"{stack.bus.subjects.prefix}.runs.live.>", cb=count_live)
        if stack
        else None
    )
    cpu_before, busy_before = processes.cpu(), machine_cpu_busy()
    started = time.perf_counter()
    with MemorySampler(processes) as memory:
        await asyncio.gather(*(chat(n) for n in range(chats)))
    elapsed = time.perf_counter() - started
    if live_sub is not None:
        await live_sub.unsubscribe()
    cpu_after, busy_after = processes.cpu(), machine_cpu_busy()
    if stack is not None:
        await asyncio.sleep(0.2)  # the last turns' acks and writes come in
        events = (await stored_run_events(stack) - events_before) / max(1, len(done))
        messages = ((await stack.varz())["in_msgs"] - msgs_before) / max(1, len(done))
    leader_writes = bucket_writes = stream_writes = None
    if stack is not None and led_before is not None:
        leader_writes, bucket_writes, stream_writes = (
            collections.Counter[str](),
            collections.Counter[str](),
            {},
        )
        every_turn = re.compile(
            rf"KV_{re.escape(stack.bus.subjects.prefix)}_(threads|runs|thread_runs)(_\d+)?"
        )
        for name, (leader, last_seq) in (await stored_by_leader(stack)).items():
            written = last_seq - led_before.get(name, (leader, 0))[1]
            leader_writes[leader] += written
            stream_writes[name] = (leader, written)
            if every_turn.fullmatch(name):
                bucket_writes[leader] += written
    cpu = {name: round(cpu_after[name] - cpu_before.get(name, 0.0), 2) for name in cpu_after}
    ours = sum(cpu.values())
    latencies = [t.latency for t in done]
    firsts = [t.first_reply for t in done if t.first_reply is not None]
    paced = client.pace is not None
    beyond = [t.latency - t.model_s for t in done]
    opening_ids = {id(t) for t in opening}
    opening_beyond = [t.latency - t.model_s for t in opening]
    later_beyond = [t.latency - t.model_s for t in done if id(t) not in opening_ids]
    first_beyond = [f - client.pace.first_token for f in firsts] if client.pace is not None else []
    return Level(
        chats=chats,
        turns=len(done),
        seconds=round(elapsed, 2),
        turns_per_s=round(len(done) / elapsed, 1),
        p50_ms=ms(quantile(latencies, 0.5)),
        p90_ms=ms(quantile(latencies, 0.9)),
        p99_ms=ms(quantile(latencies, 0.99)),
        first_reply_p50_ms=ms(quantile(firsts, 0.5)) if firsts else None,
        cpu_s=cpu,
        cores_used=round(ours / elapsed, 2),
        others_cores=round(max(0.0, (busy_after - busy_before) - ours) / elapsed, 2),
        load_average=[round(x, 2) for x in os.getloadavg()],
        beyond_model_p50_ms=ms(quantile(beyond, 0.5)) if paced else None,
        beyond_model_p99_ms=ms(quantile(beyond, 0.99)) if paced else None,
        first_beyond_model_p50_ms=ms(quantile(first_beyond, 0.5)) if first_beyond else None,
        opening_beyond_model_p50_ms=ms(quantile(opening_beyond, 0.5)) if paced and opening_beyond else None,
        later_beyond_model_p50_ms=ms(quantile(later_beyond, 0.5)) if paced and later_beyond else None,
        later_beyond_model_p99_ms=ms(quantile(later_beyond, 0.99)) if paced and later_beyond else None,
        run_events_per_turn=round(events, 1) if stack is not None else None,
        live_deltas_per_turn=round(live[0] / max(1, len(done)), 1) if stack is not None else None,
        bus_messages_per_turn=round(messages, 1) if stack is not None else None,
        peak_rss_mb=round(memory.peak_rss, 1),
        peak_pss_mb=round(memory.peak_pss, 1),
        leader_writes=dict(sorted(leader_writes.items())) if leader_writes is not None else None,
        bucket_leader_writes=dict(sorted(bucket_writes.items())) if bucket_writes is not None else None,
        stream_writes=stream_writes,
    )


async def stored_by_leader(stack: BenchStack) -> dict[str, tuple[str, int]]:
    """Each of the stack's streams and buckets: its leader and its last sequence number."""
    found = {}
    async for info in _streams(stack.bus):
        name = info.config.name or ""
        if stack.bus.subjects.prefix.upper() in name.upper() and info.cluster is not None:
            found[name] = (info.cluster.leader or "?", int(info.state.last_seq))
    return found


async def print_leaders(stack: BenchStack) -> dict[str, str]:
    """Which node leads each of the stack's streams and buckets (a cluster), and how many each."""
    leaders: dict[str, str] = {}
    async for info in _streams(stack.bus):
        name = info.config.name or ""
        if stack.bus.subjects.prefix.upper() in name.upper() and info.cluster is not None:
            leaders[name] = info.cluster.leader or "?"
    per_node = collections.Counter(leaders.values())
    print("stream and bucket leaders per node: " + "  ".join(f"{n} {c}" for n, c in sorted(per_node.items())))
    prefix = re.escape(stack.bus.subjects.prefix)
    every_turn = re.compile(
        rf"(?i:{prefix})_(CHAT_IN|RUN_EVENTS)(_\d+)?|KV_{prefix}_(threads|runs|thread_runs)(_\d+)?"
    )
    busy = sorted(name for name in leaders if every_turn.fullmatch(name))
    print(
        "  of the streams and buckets every turn writes: "
        + "  ".join(f"{re.sub(rf'^(KV_)?(?i:{prefix})_', '', name)}@{leaders[name]}" for name in busy)
    )
    return leaders


async def _streams(bus: Bus) -> Any:
    for info in await bus.js.streams_info():
        yield info


def print_level(level: Level) -> None:
    first = f", first partial p50 {level.first_reply_p50_ms} ms" if level.first_reply_p50_ms else ""
    print(
        f"{level.chats:>4} chats: {level.turns_per_s:6.1f} turns/s  "
        f"p50 {level.p50_ms:7.1f}  p90 {level.p90_ms:7.1f}  p99 {level.p99_ms:7.1f} ms{first}  "
        f"({level.turns} turns in {level.seconds:.1f}s)"
    )
    cpu = "  ".join(f"{name} {secs:.2f}" for name, secs in level.cpu_s.items())
    print(
        f"            CPU s: {cpu}  -> {level.cores_used:.2f} cores used; "
        f"other programs meanwhile {level.others_cores:.2f} cores; load {level.load_average}"
    )
    nodes = {name: secs for name, secs in level.cpu_s.items() if name.startswith("nats-n")}
    if nodes:  # a cluster: how the bus's work is shared between its nodes
        total = sum(nodes.values()) or 1.0
        print(
            "            nats-server nodes' shares of their CPU: "
            + "  ".join(
                f"{name.removeprefix('nats-')} {100 * secs / total:.0f} %" for name, secs in nodes.items()
            )
        )
    if level.leader_writes:
        total_writes = sum(level.leader_writes.values()) or 1
        print(
            "            messages stored through each node as leader: "
            + "  ".join(
                f"{node} {100 * n / total_writes:.0f} % ({n})" for node, n in level.leader_writes.items()
            )
        )
    if level.bucket_leader_writes:
        total_writes = sum(level.bucket_leader_writes.values()) or 1
        print(
            "              of which the threads, runs and thread_runs buckets': "
            + "  ".join(
                f"{node} {100 * n / total_writes:.0f} % ({n})"
                for node, n in level.bucket_leader_writes.items()
            )
        )
    # Per turn: what a process costs, whatever the machine's other load did to the wall clock.
    per_turn = {name: 1000 * secs / max(1, level.turns) for name, secs in level.cpu_s.items()}
    stack = sum(ms for name, ms in per_turn.items() if name != "bench+model")
    print(
        "            CPU ms per turn: "
        + "  ".join(f"{name} {ms:.1f}" for name, ms in per_turn.items())
        + f"  -> the stack (without bench+model) {stack:.1f}"
    )
    if level.beyond_model_p50_ms is not None:
        print(
            f"            beyond the model's own time: answer p50 {level.beyond_model_p50_ms} ms, "
            f"p99 {level.beyond_model_p99_ms} ms; first partial p50 {level.first_beyond_model_p50_ms} ms"
        )
    if level.opening_beyond_model_p50_ms is not None and level.later_beyond_model_p50_ms is not None:
        print(
            f"              a chat's first turn (all {level.chats} at once) p50 "
            f"{level.opening_beyond_model_p50_ms} ms; the turns after it p50 "
            f"{level.later_beyond_model_p50_ms} ms, p99 {level.later_beyond_model_p99_ms} ms"
        )
    print(
        f"            per turn: {level.run_events_per_turn} run events stored "
        f"(+{level.live_deltas_per_turn} live), "
        f"{level.bus_messages_per_turn} bus messages; peak RSS {level.peak_rss_mb} MB, "
        f"PSS {level.peak_pss_mb} MB"
    )


TRAFFIC_PAIRS = 3  # first message + follow-up pairs whose bus traffic is counted


async def single_turns(
    client: ChatClient, counter: TrafficCounter, count: int, text: str, timeline: bool = False
) -> dict[str, Any]:
    """Turns one after another: a chat's first message, then a follow-up; then, apart (counting
    every message on the bus loads this process, which also serves the model), their bus traffic."""
    first: list[Turn] = []
    follow: list[Turn] = []
    recorder = HopRecorder(client.bus) if timeline else None
    timed: list[tuple[str, Turn, float]] = []  # (which, turn, when sent) for the hop view
    if recorder is not None:
        await recorder.start()
    for i in range(count):
        chat_id = f"single-{uuid.uuid4().hex[:6]}-{i}"
        for turns, which, words in ((first, "first message", text), (follow, "follow-up", text + " again")):
            sent = time.perf_counter()
            turns.append(await client.turn(chat_id, words))
            timed.append((f"{which} {i + 1}", turns[-1], sent))
            await asyncio.sleep(0.05)  # the turn's last acks and writes come in
    if recorder is not None:
        await recorder.stop()
        print_slowest_turns(timed, recorder)
    await counter.start()
    traffic_first: collections.Counter[str] = collections.Counter()
    traffic_follow: collections.Counter[str] = collections.Counter()
    try:
        for i in range(TRAFFIC_PAIRS):
            chat_id = f"traffic-{uuid.uuid4().hex[:6]}-{i}"
            before = counter.snapshot()
            await client.turn(chat_id, text)
            await asyncio.sleep(0.05)
            middle = counter.snapshot()
            counter.keep_timeline = timeline and i == TRAFFIC_PAIRS - 1
            sent = time.perf_counter()
            await client.turn(chat_id, text + " again")
            await asyncio.sleep(0.05)
            if counter.keep_timeline:
                counter.keep_timeline = False
                print("a follow-up turn on the bus (ms since the message was sent, what, subject, bytes):")
                for at, kind, subject, size in counter.timeline:
                    print(f"  {1000 * (at - sent):7.2f}  {kind:28} {subject} {size}")
            traffic_first += middle - before
            traffic_follow += counter.snapshot() - middle
    finally:
        await counter.stop()

    def per_turn(traffic: collections.Counter[str]) -> dict[str, float]:
        return {k: round(v / TRAFFIC_PAIRS, 1) for k, v in sorted(traffic.items())}

    def figures(turns: list[Turn]) -> dict[str, Any]:
        firsts = [t.first_reply for t in turns if t.first_reply is not None]
        return {
            "p50_ms": ms(quantile([t.latency for t in turns], 0.5)),
            "p90_ms": ms(quantile([t.latency for t in turns], 0.9)),
            "max_ms": ms(max(t.latency for t in turns)),
            "first_reply_p50_ms": ms(quantile(firsts, 0.5)) if firsts else None,
        }

    return {
        "first_message": {**figures(first), "traffic_per_turn": per_turn(traffic_first)},
        "follow_up": {**figures(follow), "traffic_per_turn": per_turn(traffic_follow)},
    }


def print_single(single: dict[str, Any]) -> None:
    for name, label in (("first_message", "a chat's first message"), ("follow_up", "a follow-up")):
        part = single[name]
        first = f", first partial {part['first_reply_p50_ms']} ms" if part["first_reply_p50_ms"] else ""
        slowest = f", slowest {part['max_ms']} ms" if "max_ms" in part else ""
        print(f"single turn, {label}: median {part['p50_ms']} ms, p90 {part['p90_ms']} ms{slowest}{first}")
    traffic = single["follow_up"]["traffic_per_turn"]
    kv_reads = sum(v for k, v in traffic.items() if k.startswith("kv read"))
    kv_writes = sum(v for k, v in traffic.items() if k.startswith("kv write"))
    print(f"bus traffic of a follow-up turn: {kv_reads:g} KV reads, {kv_writes:g} KV writes; in all:")
    print("  " + ", ".join(f"{k} {v:g}" for k, v in traffic.items()))


def print_comparison(old: dict[str, Any], new: dict[str, Any]) -> None:
    print(f"\ncompared with {old.get('label') or 'the earlier run'}:")
    for name in ("first_message", "follow_up") if "single" in old and "single" in new else ():
        a, b = old["single"][name]["p50_ms"], new["single"][name]["p50_ms"]
        print(f"  single {name}: median {a} -> {b} ms ({b / a:.2f}x)")
    older = {}
    for level in old["levels"]:
        older.setdefault(level["chats"], []).append(level)
    for level in new["levels"]:
        for was in older.get(level["chats"], [])[:1]:
            print(
                f"  {level['chats']:>4} chats: {was['turns_per_s']} -> {level['turns_per_s']} turns/s "
                f"({level['turns_per_s'] / was['turns_per_s']:.2f}x), p99 {was['p99_ms']} -> "
                f"{level['p99_ms']} ms, cores used {was['cores_used']} -> {level['cores_used']}"
            )


def print_ranges(levels: list[Level]) -> None:
    by_chats: dict[int, list[Level]] = {}
    for level in levels:
        by_chats.setdefault(level.chats, []).append(level)
    print("\nover the repeats (median [min-max]):")
    for chats, runs in by_chats.items():

        def span(values: list[float]) -> str:
            return f"{quantile(values, 0.5):g} [{min(values):g}-{max(values):g}]"

        print(
            f"{chats:>4} chats: {span([r.turns_per_s for r in runs])} turns/s, "
            f"p50 {span([r.p50_ms for r in runs])} ms, p99 {span([r.p99_ms for r in runs])} ms"
        )


# ---------------------------------------------------------------------------- main


async def warm_up(client: ChatClient, chats: int) -> None:
    """Until every runner has compiled its agent: a few chats at once, twice."""
    for round_ in range(2):
        await asyncio.gather(*(client.turn(f"warm-{round_}-{i}", "hello") for i in range(max(4, chats))))


def _durable(name: str) -> str:
    """A durable's name with a router partition's number made `<k>` (counted together)."""
    return re.sub(r"^(router-(?:in|ev))-\d+$", r"\1-<k>", name)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
    runners = process_count(args.runners)
    pace = Pace(args.first_token_ms / 1000, args.token_interval_ms / 1000) if args.model == "paced" else None
    # The model echoes "You said: <message>", a word a token; the message ends with "(<n>)".
    words = args.answer_tokens - 3 if pace is not None else args.words
    text = " ".join(f"word{i}" for i in range(words))
    info = machine()
    print(
        f"machine: {info['cores']} cores ({info['cpu']}), load average {info['load_average']}; "
        f"Python {info['python']}"
    )
    print(
        f"chat path: chat.in -> router ({args.routers} process{'es' if args.routers > 1 else ''}) -> "
        f"runner ({runners} processes) -> chat.out; "
        + (
            f"paced model: first token after {args.first_token_ms:g} ms, then one every "
            f"{args.token_interval_ms:g} ms, {words + 3} tokens per answer "
            f"({1000 * pace.seconds(words + 3):.0f} ms); "
            if pace is not None
            else f"instant model (zero latency), {words + 3} streamed words per answer; "
        )
        + f"JetStream sync_interval {getattr(args, 'sync_interval', 'always')}; "
        + ("runs followed live (as by a web UI)" if args.follow else "runs read from their log (as a chat's)")
    )
    results: dict[str, Any] = {
        "label": args.label,
        "machine": info,
        "runners": runners,
        "routers": args.routers,
        "words": words,
        "model": args.model,
        "first_token_ms": args.first_token_ms if pace else 0,
        "token_interval_ms": args.token_interval_ms if pace else 0,
        "sync_interval": getattr(args, "sync_interval", "always"),
        "follow": args.follow,
    }
    settings = {"title": {"enabled": True}, "memory": {"enabled": True}}
    sync_interval = getattr(args, "sync_interval", "always")
    cluster = getattr(args, "cluster", 0) or 0
    async with bench_stack(settings, runners=runners, sync_interval=sync_interval, cluster=cluster) as stack:
        if cluster:
            results["cluster"] = cluster
            results["leaders"] = await print_leaders(stack)
        for n in range(args.routers):  # they share the chat partitions (channels.router.partitions)
            await stack.start("router", "router" if args.routers == 1 else f"router-{n + 1}")
        processes = Processes()
        processes.add("bench+model", os.getpid())
        for name, pid in stack.processes.items():
            processes.add(name, pid)
        await sample_with_pyspy(stack.processes["runner-1"], "--gil")  # runner 1, meanwhile
        stack.fake.pace = pace
        client = ChatClient(stack.bus, pace, follow=args.follow)
        await client.start()
        try:
            await warm_up(client, args.warmup)
            if args.single > 0:  # 0: the levels only
                single = await single_turns(
                    client, TrafficCounter(stack.bus), args.single, text, getattr(args, "timeline", False)
                )
                print_single(single)
                results["single"] = single
            measured: list[Level] = []
            for repeat in range(args.repeat):
                if args.repeat > 1:
                    print(f"-- run {repeat + 1} of {args.repeat}")
                for chats in levels:
                    turns = max(args.turns, 2 * chats)
                    level = await run_level(
                        client, processes, chats, turns, text, f"r{repeat}c{chats}", stack
                    )
                    print_level(level)
                    measured.append(level)
            if args.repeat > 1:
                print_ranges(measured)
            results["levels"] = [asdict(level) for level in measured]
            results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        finally:
            await client.stop()
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps(results, indent=2))
        print(f"figures written to {args.json}")
    if args.compare:
        earlier = json.loads(await asyncio.to_thread(Path(args.compare).read_text))
        print_comparison(earlier, results)
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--levels", default="10,50,200", help="chats at once, comma separated")
    parser.add_argument("--turns", type=int, default=300, help="turns per level (at least 2 per chat)")
    parser.add_argument("--single", type=int, default=20, help="chats in the single-turn part")
    parser.add_argument("--words", type=int, default=40, help="words the user sends (echoed back)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--model",
        choices=["paced", "instant"],
        default="paced",
        help="paced: the model streams as a real one (default); instant: it answers at once",
    )
    parser.add_argument("--first-token-ms", type=float, default=300.0, help="paced: time to first token")
    parser.add_argument("--token-interval-ms", type=float, default=15.0, help="paced: time between tokens")
    parser.add_argument("--answer-tokens", type=int, default=60, help="paced: tokens (words) per answer")
    parser.add_argument("--repeat", type=int, default=1, help="measure every level this many times")
    parser.add_argument("--runners", type=int, default=2, help="runner processes (0: as antler up starts)")
    parser.add_argument("--routers", type=int, default=1, help="router processes (they share the partitions)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--compare", help="an earlier --json file to compare with")
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument(
        "--sync-interval", default="always", help="the nats-server's JetStream sync_interval (always, 2m)"
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print one follow-up turn's bus messages and the slowest single turns hop by hop",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="each turn's run followed live, as a web UI follows it (its text sent live as it streams)",
    )
    parser.add_argument(
        "--cluster",
        type=int,
        default=0,
        help="this many nats-servers clustered on this machine (3: streams and buckets R3), each "
        "node's CPU share printed per level",
    )


async def run_from_args(args: argparse.Namespace) -> None:
    """`antler bench chat` (its `--turns` may be None: the default here)."""
    await main(with_defaults(args, add_arguments))


if __name__ == "__main__":
    run_as_script(__doc__, add_arguments, main)
