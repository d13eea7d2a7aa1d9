"""Every subject, stream, bucket and service name, under one configurable prefix.

Streams and buckets carry the prefix too, so several Antler installations (or
tests) can share one NATS account without seeing each other's messages:
prefix `antler` gives stream `ANTLER_RUNS` and bucket `antler_runs`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_PREFIX = "antler"
_TOKEN_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_token(value: str) -> str:
    """Make `value` usable as one subject token (no dots, wildcards or spaces)."""
    return _TOKEN_UNSAFE.sub("_", value) or "_"


def chat_route(channel: str, chat_id: str) -> str:
    """The subject token that decides a chat's partition: the same for its messages and its runs'
    events, so one router handles both. Topics of a chat share it (each is still a chat of its own)."""
    return safe_token(f"{channel}-{chat_id}")


def partition_transform(source: str, partitions: int) -> tuple[str, str]:
    """A stream's subject transform that appends the partition of the source's last wildcard token
    (nats-server's `partition()`: a hash of the token, modulo the count) as one more token."""
    tokens = source.split(".")
    wildcards = [i for i, token in enumerate(tokens) if token == "*"]
    destination = list(tokens)
    for n, index in enumerate(wildcards, start=1):
        destination[index] = f"{{{{wildcard({n})}}}}"
    destination.append(f"{{{{partition({partitions},{len(wildcards)})}}}}")
    return source, ".".join(destination)


SPLIT_BUCKETS: set[str] = set()  # `Subjects.split_buckets` of every prefix this process has named


@dataclass(frozen=True)
class Subjects:
    """The names on the bus (docs/architecture.md), computed for one prefix."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        SPLIT_BUCKETS.update(self.split_buckets)  # known to helpers given only a bucket's name

    # -- subjects ---------------------------------------------------------
    def chat_in(self, channel: str, chat_id: str) -> str:
        """Where a chat's inbound messages are published: `<p>.chat.in.<channel>.<chat route>`.

        Publishers add the chat's partition as a last token (`bus.chat_partitions.chat_in_subject`),
        so every message of one chat is stored in its partition's stream, which one router at a time
        owns.
        """
        return f"{self.prefix}.chat.in.{safe_token(channel)}.{chat_route(channel, chat_id)}"

    def chat_in_channel(self, channel: str) -> str:
        """The stem of one channel's inbound subjects (a label: where an unreadable message was bound)."""
        return f"{self.prefix}.chat.in.{safe_token(channel)}"

    @property
    def chat_in_direct(self) -> str:
        """Inbound messages published without their chat's route (`<p>.chat.in.<channel>`: scripts)."""
        return f"{self.prefix}.chat.in.*"

    def chat_in_partition(self, partition: int) -> str:
        """One partition's inbound messages, as stored (`<p>.chat.in.<channel>.<route>.<partition>`)."""
        return f"{self.prefix}.chat.in.*.*.{partition}"

    def chat_out(self, channel: str) -> str:
        return f"{self.prefix}.chat.out.{safe_token(channel)}"

    @property
    def chat_in_all(self) -> str:
        return f"{self.prefix}.chat.in.>"

    @property
    def chat_out_all(self) -> str:
        return f"{self.prefix}.chat.out.>"

    @property
    def runs_submit(self) -> str:
        return f"{self.prefix}.runs.submit"

    def run_events(self, run_id: str) -> str:
        """Every event of one run, whatever the route it was published on (a filter, not a subject)."""
        return f"{self.prefix}.runs.ev.{safe_token(run_id)}.>"

    def run_events_for(self, run_id: str, chat: tuple[str, str] | None, partition: int) -> str:
        """Where a run's events are published: `<p>.runs.ev.<run>.chat.<chat route>.<partition>` for
        a run with a chat (`chat` = its channel and chat id; the partition is the chat's, so the
        chat's router reads them), `<p>.runs.ev.<run>.api.<partition>` for any other. The partition
        picks the `RUN_EVENTS_<k>` stream (`bus.run_events`)."""
        if chat is None:
            return f"{self.prefix}.runs.ev.{safe_token(run_id)}.api.{partition}"
        return f"{self.prefix}.runs.ev.{safe_token(run_id)}.chat.{chat_route(*chat)}.{partition}"

    def run_live(self, run_id: str) -> str:
        """Every live delta of one run (a filter): text sent at once on core NATS, stored later merged
        into a `messages` event (`RunEvent.part`, `agents.runner.event_log`)."""
        return f"{self.prefix}.runs.live.{safe_token(run_id)}.>"

    def run_live_for(self, run_id: str, chat: tuple[str, str] | None) -> str:
        """Where a run's live deltas are published: `<p>.runs.live.<run>.chat.<chat route>` for a run
        with a chat, `<p>.runs.live.<run>.api` for any other. No stream stores them."""
        if chat is None:
            return f"{self.prefix}.runs.live.{safe_token(run_id)}.api"
        return f"{self.prefix}.runs.live.{safe_token(run_id)}.chat.{chat_route(*chat)}"

    def chat_run_live(self, channel: str, chat_id: str) -> str:
        """The live deltas of every run of one chat (a core subscription)."""
        return f"{self.prefix}.runs.live.*.chat.{chat_route(channel, chat_id)}"

    def chat_run_events(self, channel: str, chat_id: str) -> str:
        """The events of every run of one chat, as runners publish them (a core subscription)."""
        return f"{self.prefix}.runs.ev.*.chat.{chat_route(channel, chat_id)}.*"

    def run_events_partition(self, partition: int) -> str:
        """The events of the chat runs of one partition (what its router reads)."""
        return f"{self.prefix}.runs.ev.*.chat.*.{partition}"

    def run_events_partition_subjects(self, partition: int) -> list[str]:
        """What `RUN_EVENTS_<k>` stores: the partition's chat runs' events and other runs' whose id
        hashes to it."""
        return [self.run_events_partition(partition), f"{self.prefix}.runs.ev.*.api.{partition}"]

    @property
    def unsplit_run_events(self) -> list[str]:
        """What the single `RUN_EVENTS` of earlier installations keeps taking when the partition
        streams are made: what earlier versions' runners publish (no partition token; they do not
        overlap the partition streams' subjects)."""
        p = self.prefix
        return [f"{p}.runs.ev.*.chat.*", f"{p}.runs.ev.*.api", f"{p}.runs.ev.*"]

    @property
    def run_events_all(self) -> str:
        return f"{self.prefix}.runs.ev.>"

    @property
    def chat_in_published(self) -> str:
        """What publishers use (the stream's transform source): `<p>.chat.in.<channel>.<route>`."""
        return f"{self.prefix}.chat.in.*.*"

    def run_control(self, run_id: str) -> str:
        return f"{self.prefix}.runs.ctl.{safe_token(run_id)}"

    @property
    def run_control_all(self) -> str:
        return f"{self.prefix}.runs.ctl.*"

    @property
    def subagents_submit(self) -> str:
        return f"{self.prefix}.subagents.submit"

    def subagent_progress(self, parent_run_id: str) -> str:
        return f"{self.prefix}.subagents.progress.{safe_token(parent_run_id)}"

    def memory_update(self, thread_id: str) -> str:
        """A thread's conversation for the memory updater (the stream keeps the newest per thread)."""
        return f"{self.prefix}.memory.update.{safe_token(thread_id)}"

    def component_ready(self, component: str) -> str:
        """ComponentReady announcements of one component's processes (core NATS)."""
        return f"{self.prefix}.ready.{safe_token(component)}"

    def metrics(self, component: str, process: str) -> str:
        """MetricsSnapshot of one process (core NATS; `bus.metrics_feed`)."""
        return f"{self.prefix}.metrics.{safe_token(component)}.{safe_token(process)}"

    @property
    def metrics_all(self) -> str:
        return f"{self.prefix}.metrics.>"

    def subagent_cancel(self, parent_run_id: str) -> str:
        return f"{self.prefix}.subagents.cancel.{safe_token(parent_run_id)}"

    @property
    def subagent_cancel_all(self) -> str:
        return f"{self.prefix}.subagents.cancel.*"

    @property
    def memory_update_all(self) -> str:
        return f"{self.prefix}.memory.update.>"

    def schedule_definition(self, task_id: str) -> str:
        """A scheduled task's definition (a message the server fires on its schedule: `Nats-Schedule`)."""
        return f"{self.prefix}.sched.def.{safe_token(task_id)}"

    def schedule_firing(self, task_id: str) -> str:
        """Where the server puts each firing of a task's schedule (and a trigger-now puts one)."""
        return f"{self.prefix}.sched.fire.{safe_token(task_id)}"

    @property
    def schedule_firings_all(self) -> str:
        return f"{self.prefix}.sched.fire.*"

    @property
    def schedule_definitions_all(self) -> str:
        return f"{self.prefix}.sched.def.*"

    def service_subject(self, service: str, endpoint: str) -> str:
        """A request/reply service's endpoint: `<prefix>.<service>.<endpoint>`."""
        return f"{self.prefix}.{service}.{endpoint}"

    def sandbox(self, endpoint: str) -> str:
        return self.service_subject("sandbox", endpoint)

    def threads(self, endpoint: str) -> str:
        return self.service_subject("threads", endpoint)

    def event(self, kind: str) -> str:
        """An announcement others react to: `thread.deleted`; (later) configuration changes."""
        return f"{self.prefix}.events.{kind}"

    @property
    def events_all(self) -> str:
        return f"{self.prefix}.events.>"

    def dlq(self, stream: str) -> str:
        return f"{self.prefix}.dlq.{stream}"

    @property
    def dlq_all(self) -> str:
        return f"{self.prefix}.dlq.>"

    # -- streams ----------------------------------------------------------
    def stream(self, kind: str) -> str:
        """Stream name for a kind: CHAT_IN, CHAT_OUT, RUNS, RUN_EVENTS, SUBAGENTS, MEMORY, EVENTS, DLQ."""
        return f"{safe_token(self.prefix).upper()}_{kind}"

    @property
    def unsplit_chat_in_stream(self) -> str:
        """The single inbound stream of installations made before the split by partition: drained
        by the routers, then removed (bus.provision)."""
        return self.stream("CHAT_IN")

    def chat_in_partition_stream(self, partition: int) -> str:
        """One partition's inbound chat messages (`CHAT_IN_<k>`). Partition 0's also holds those
        published without a partition: without their chat's route (scripts: `chat_in_direct`), or
        without the partition token (adapters of earlier versions: `chat_in_published`)."""
        return self.stream(f"CHAT_IN_{partition}")

    @property
    def chat_out_stream(self) -> str:
        return self.stream("CHAT_OUT")

    @property
    def runs_stream(self) -> str:
        return self.stream("RUNS")

    @property
    def unsplit_run_events_stream(self) -> str:
        """The single run events stream of installations made before the split by partition: kept
        (narrowed to `unsplit_run_events`) until its `max_age` has emptied it."""
        return self.stream("RUN_EVENTS")

    def run_events_partition_stream(self, partition: int) -> str:
        """One partition's run events (`RUN_EVENTS_<k>`; which run is in which: `bus.run_events`)."""
        return self.stream(f"RUN_EVENTS_{partition}")

    @property
    def subagents_stream(self) -> str:
        return self.stream("SUBAGENTS")

    @property
    def memory_stream(self) -> str:
        return self.stream("MEMORY")

    @property
    def events_stream(self) -> str:
        return self.stream("EVENTS")

    @property
    def dlq_stream(self) -> str:
        return self.stream("DLQ")

    @property
    def schedules_stream(self) -> str:
        return self.stream("SCHEDULES")

    # -- KV buckets and object store ---------------------------------------
    def bucket(self, name: str) -> str:
        return f"{safe_token(self.prefix)}_{name}"

    @property
    def threads_bucket(self) -> str:
        return self.bucket("threads")

    @property
    def chats_bucket(self) -> str:
        return self.bucket("chats")

    @property
    def thread_runs_bucket(self) -> str:
        """The runs of each thread, in order: keys `<thread_id>.<run_id>` (values empty)."""
        return self.bucket("thread_runs")

    @property
    def runs_bucket(self) -> str:
        return self.bucket("runs")

    @property
    def split_buckets(self) -> tuple[str, ...]:
        """The buckets written on every turn, one bucket per partition each (`bus.split_kv`):
        `threads`, `runs`, `thread_runs`."""
        return (self.threads_bucket, self.runs_bucket, self.thread_runs_bucket)

    @property
    def subagent_results_bucket(self) -> str:
        """Finished subagent tasks by `<parent run>.<task>` (entries expire)."""
        return self.bucket("subagent_results")

    @property
    def background_tasks_bucket(self) -> str:
        """Tasks started in the background, by `<thread>.<task>` (entries expire)."""
        return self.bucket("background_tasks")

    @property
    def settings_bucket(self) -> str:
        """Settings every process follows: `extensions` (extensions_config.json as the gateway last
        saved it), `mcp_status` (how the MCP servers started)."""
        return self.bucket("settings")

    @property
    def agents_bucket(self) -> str:
        """Users' custom agents (`AgentDefinition`)."""
        return self.bucket("agents")

    @property
    def memory_bucket(self) -> str:
        return self.bucket("memory")

    @property
    def replies_bucket(self) -> str:
        """Which platform message shows each run's streaming answer (entries expire after a day)."""
        return self.bucket("replies")

    @property
    def schedules_bucket(self) -> str:
        """Scheduled tasks (`ScheduledTask`, key: task id), written only by the scheduler."""
        return self.bucket("schedules")

    @property
    def schedule_runs_bucket(self) -> str:
        """Each task's firings in order (`ScheduledTaskRun`, keys `<task>.<fired ms>.<firing>`)."""
        return self.bucket("schedule_runs")

    @property
    def leases_bucket(self) -> str:
        """Leases with a TTL per key (`bus.leases`): routers' partitions, adapters' connections."""
        return self.bucket("leases")

    @property
    def files_store(self) -> str:
        return self.bucket("files")

    # -- micro services ----------------------------------------------------
    def service_name(self, component: str) -> str:
        """`$SRV` service names allow only letters, digits, '-' and '_'."""
        return f"{safe_token(self.prefix)}-{component}"

    def full(self, pattern: str) -> str:
        """Prefix a relative subject pattern (`runs.ev.>`), leaving absolute ones alone."""
        if pattern.startswith((f"{self.prefix}.", "$", "_INBOX")) or pattern == self.prefix:
            return pattern
        return f"{self.prefix}.{pattern}"
