"""Per-component NATS users: each component may touch only the subjects its work needs.

`RIGHTS` says, per component kind, what it does on the bus (streams it consumes
with which durable, subjects it publishes and subscribes, KV buckets it reads
or writes, the object store, services it serves or calls). `permissions()`
turns that into a NATS user's publish/subscribe allow lists, JetStream API
subjects included, scoped to the installation's prefix: the router cannot
publish on sandbox subjects, the gateway cannot consume the runs work queue,
an adapter can neither read nor write another channel's messages.

`generate_users()` makes one user per component (`<prefix>-<component>`, a
random password) plus `<prefix>-admin` (everything: provisioning, the CLI).
`server_block()` renders them as a nats-server `authorization` block: the
embedded server's, or one an operator pastes into their own cluster's config
(`antler creds`).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from bus.chat_partitions import MAX as MAX_PARTITIONS
from bus.split_kv import KINDS as SPLIT_KINDS
from bus.split_kv import partition_bucket
from bus.subjects import Subjects

ADMIN = "admin"
CHANNELS = (
    "telegram",
    "slack",
    "feishu",
    "dingtalk",
    "discord",
    "wecom",
    "wechat",
    "msteams",
    "github",
    "matrix",
)
USERS_FILE = "nats-users.json"


@dataclass(frozen=True)
class Rights:
    """What one component does on the bus; subjects are relative to the prefix."""

    consume: tuple[tuple[str, str, str], ...] = ()  # (stream kind, durable, filter) pull consumers
    read_streams: tuple[str, ...] = ()  # stream kinds read from (ordered consumers, get message)
    publish: tuple[str, ...] = ()  # subjects published (core or JetStream)
    subscribe: tuple[str, ...] = ()  # core subjects subscribed to
    kv_write: tuple[str, ...] = ()  # buckets read and written
    kv_read: tuple[str, ...] = ()  # buckets only read (and watched)
    files: bool = False  # the object store (read and write)
    serve: tuple[str, ...] = ()  # micro services answered
    call: tuple[str, ...] = ()  # micro services asked
    # Subjects outside the prefix that a protocol fixes (the NATS agent protocol's `agents.*`).
    publish_absolute: tuple[str, ...] = ()
    subscribe_absolute: tuple[str, ...] = ()
    stream_info: tuple[str, ...] = ()  # stream kinds whose configuration only is read
    observe: bool = False  # every process's metrics and every durable's JetStream counts (`/metrics`)


def _adapter(channel: str) -> Rights:
    return Rights(
        consume=(("CHAT_OUT", channel, f"chat.out.{channel}"),),
        # Its own messages in; a platform message it cannot read, dead-lettered with the reason.
        # `.*.*`: the chat's route and partition (bus.chat_partitions.chat_in_subject); `.*` as
        # earlier versions published (CHAT_IN_0 takes those: an upgrade in any order loses nothing).
        publish=(f"chat.in.{channel}.*.*", f"chat.in.{channel}.*", f"dlq.{channel}"),
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # the partition count (not the messages)
        kv_write=("replies", "leases"),  # leases: one active copy per bot (channels.standby)
        kv_read=("settings",),  # the skills catalog: Telegram registers their commands
        files=True,
    )


RIGHTS: dict[str, Rights] = {
    "runner": Rights(
        consume=(("RUNS", "runner", "runs.submit"),),
        # Its runs' events: one stream per chat partition (bus.run_events), and the single one of
        # before the split, read until removed.
        read_streams=("RUN_EVENTS_<k>", "RUN_EVENTS"),
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # the partition count: which stream a run's events go to
        publish=(
            "runs.submit",  # goal mode's continuations
            "runs.ev.>",
            "runs.live.>",  # streamed text at once, stored merged a moment later (agents.runner.event_log)
            "runs.ctl.*",
            "memory.update.>",
            "events.thread.deleted",
            "subagents.submit",
            "subagents.cancel.*",
            "audit.>",  # runs started, tool calls, refusals (access.audit)
            "sched.def.*",  # an approval request's expiry, fired by the server (agents.runner.approvals)
        ),
        subscribe=("runs.ctl.*", "subagents.progress.*"),
        # usage: per-person budgets (access.usage); background_tasks: what the task tool started
        kv_write=(
            "threads",
            "runs",
            "thread_runs",
            "settings",
            "agents",
            "model_slots",
            "usage",
            "background_tasks",
        ),
        kv_read=("memory", "subagent_results", "access"),  # people's roles (access.roles)
        # custom skills' versions (skills/<name>/<version>), unpacked on this machine; runs' journals
        files=True,
        serve=("threads",),
        call=("sandbox", "subagents", "schedules", "browser"),
    ),
    "subagents": Rights(
        consume=(("SUBAGENTS", "subagents", "subagents.submit"),),
        # runs.submit: a background task's outcome, as a run on its thread (with its record and index)
        publish=("subagents.progress.*", "audit.>", "runs.submit"),
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # as a submitter: which stream a run's events go to
        subscribe=("subagents.cancel.*", "runs.ctl.*"),
        # background_tasks: a background command's record says when a broker started it (never twice)
        kv_write=(
            "subagent_results",
            "settings",
            "model_slots",
            "usage",
            "runs",
            "thread_runs",
            "background_tasks",
        ),
        kv_read=("memory", "access"),
        files=True,  # custom skills' versions, as the runner
        serve=("subagents",),
        call=("sandbox",),
    ),
    "memory": Rights(
        consume=(("MEMORY", "memory", "memory.update.>"),),
        read_streams=("MEMORY",),
        kv_write=("memory", "model_slots"),
        serve=("memory",),
    ),
    "sandbox": Rights(read_streams=("EVENTS",), kv_read=("settings",), files=True, serve=("sandbox",)),
    # Screenshots and captures into the thread's outputs; its `browser.thread.<token>` subjects too.
    "browser": Rights(files=True, serve=("browser",)),
    "router": Rights(
        consume=(
            # One durable per chat partition (`router-in-<k>`, `router-ev-<k>`: channels.partitions).
            # `CHAT_IN_<k>`: one stream per partition (each `k` below bus.chat_partitions.MAX);
            # `CHAT_IN`: the single stream of before the split, drained until removed.
            ("CHAT_IN_<k>", "*", "chat.in.*.*.*"),
            ("CHAT_IN_<k>", "router-in-direct", "chat.in.*"),  # published without the chat's route
            ("CHAT_IN_<k>", "router-in-unpartitioned", "chat.in.*.*"),  # or its partition
            ("CHAT_IN", "*", "chat.in.*.*.*"),
            ("CHAT_IN", "router-in-direct", "chat.in.*"),
            ("RUN_EVENTS_<k>", "*", "runs.ev.*.chat.*.*"),
            ("RUN_EVENTS", "*", "runs.ev.*.chat.*.*"),
            ("EVENTS", "router-thread-deleted", "events.thread.deleted"),
        ),
        # CHAT_IN: the oldest message a chat has there (channels.router.inbound, after a reconnect)
        read_streams=("RUN_EVENTS_<k>", "RUN_EVENTS", "CHAT_IN_<k>", "CHAT_IN"),
        publish=("runs.submit", "runs.ctl.*", "chat.out.*", "audit.>"),
        # access: /connect codes and linked chat users (access.links)
        kv_write=("chats", "runs", "thread_runs", "leases", "access"),
        kv_read=("threads", "memory", "settings", "usage"),  # usage: /usage
        files=True,
        serve=("router",),
        call=("threads", "schedules"),
    ),
    "scheduler": Rights(
        consume=(("SCHEDULES", "scheduler", "sched.fire.*"),),
        publish=("sched.def.*", "sched.fire.*", "runs.submit", "audit.>"),  # audit: schedule changes
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # the partition count: which stream a run's events go to
        kv_write=("schedules", "schedule_runs", "runs", "thread_runs"),
        kv_read=("threads", "chats"),
        serve=("schedules",),
        call=("threads",),
    ),
    "gateway": Rights(
        read_streams=("RUN_EVENTS_<k>", "RUN_EVENTS", "AUDIT"),
        publish=("runs.submit", "runs.ctl.*", "audit.>"),
        subscribe=("runs.live.>",),  # runs' streamed text as it comes (bus.runs.follow_run)
        kv_write=("runs", "thread_runs", "settings", "agents", "users", "login_failures", "access"),
        kv_read=("threads", "memory", "usage"),  # usage: GET /api/usage
        files=True,
        call=("threads", "memory", "sandbox", "subagents", "schedules", "browser"),
        observe=True,
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # the partition count, for the durables' metrics
    ),
    **{channel: _adapter(channel) for channel in CHANNELS},
    "agentproto": Rights(
        read_streams=("RUN_EVENTS_<k>", "RUN_EVENTS"),
        stream_info=("CHAT_IN_0", "CHAT_IN"),  # the partition count: which stream a run's events go to
        publish=("runs.submit", "runs.ctl.*"),
        subscribe=("runs.live.>",),  # runs' streamed text as it comes (bus.runs.follow_run)
        kv_write=("runs", "thread_runs"),
        kv_read=("settings", "agents"),
        files=True,  # attachments in, presented files out
        call=("threads",),
        # Heartbeats, and the chunks of a streamed answer on the caller's reply subject (more than
        # the one reply `allow_responses` grants); prompts and status requests of every owner.
        publish_absolute=("agents.hb.>", "_INBOX.agents.>"),
        subscribe_absolute=("agents.prompt.>", "agents.status.>", "$SRV.>"),
    ),
}


def rights_table() -> str:
    """`RIGHTS` as a Markdown table (docs/operating.md holds this exact text; a test keeps it so)."""

    def cell(items: tuple[str, ...] | list[str]) -> str:
        return ", ".join(f"`{item}`" for item in items) or "—"

    rows = [
        "| component | streams (stream/durable: filter; or read) | publishes | subscribes | KV read+write | "
        "KV read | files | serves | calls |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in RIGHTS.items():
        consumes = [f"{kind}/{durable}: {filter_subject}" for kind, durable, filter_subject in r.consume]
        reads = [f"{kind} (read)" for kind in r.read_streams] + [f"{kind} (info)" for kind in r.stream_info]
        rows.append(
            f"| {name} | {cell(consumes + reads)} | {cell(r.publish + r.publish_absolute)} | "
            f"{cell(r.subscribe + r.subscribe_absolute)} | "
            f"{cell(_kinds(r.kv_write))} | {cell(_kinds(r.kv_read))} | {'yes' if r.files else '—'} | "
            f"{cell(r.serve)} | "
            f"{cell(r.call)} |"
        )
    return "\n".join(rows) + "\n"


def _kinds(buckets: tuple[str, ...]) -> list[str]:
    """Bucket kinds as the table shows them: a split one as its buckets per partition and the single
    bucket of before the split."""
    return [
        name
        for bucket in buckets
        for name in ([f"{bucket}_<k>", bucket] if bucket in SPLIT_KINDS else [bucket])
    ]


@dataclass(frozen=True)
class NatsUser:
    component: str
    user: str
    password: str
    permissions: dict[str, object] | None = field(default=None)  # None: everything (the admin)


def _stream_reads(js: str, stream: str) -> list[str]:
    """Reading a stream: its info, single messages, and unnamed (ephemeral, ordered) consumers only:
    the server refuses a durable name on that subject, so no reader redirects or drains a durable."""
    return [
        f"{js}.STREAM.INFO.{stream}",
        f"{js}.STREAM.MSG.GET.{stream}",
        f"{js}.DIRECT.GET.{stream}",
        f"{js}.DIRECT.GET.{stream}.>",
        f"{js}.CONSUMER.CREATE.{stream}",
        f"{js}.CONSUMER.INFO.{stream}.*",  # a watcher checking its consumer after a reconnect
        f"$JS.FC.{stream}.>",  # flow control answers of ordered consumers
    ]


def _bucket_names(subjects: Subjects, bucket: str) -> list[str]:
    """A bucket's full names: a bucket split by partition (`bus.split_kv`) is one per partition the
    count may reach, and the single bucket of before the split, used until it is moved."""
    name = subjects.bucket(bucket)
    if bucket not in SPLIT_KINDS:
        return [name]
    return [name, *(partition_bucket(name, k) for k in range(MAX_PARTITIONS))]


def per_partition(
    consume: tuple[tuple[str, str, str], ...], partitions: int = MAX_PARTITIONS
) -> list[tuple[str, str, str]]:
    """`consume` with each `<k>` stream kind named once per chat partition (by default every one
    the partition count may reach: a user's rights do not change with the count)."""
    return [
        (kind.replace("<k>", str(k)), durable, filter_subject)
        for kind, durable, filter_subject in consume
        for k in (range(partitions) if "<k>" in kind else (0,))
    ]


def permissions(component: str, subjects: Subjects) -> dict[str, object]:
    """The NATS permissions block of `component`'s user.

    Raises:
        KeyError: not a component kind in `RIGHTS`.
    """
    rights = RIGHTS[component]
    js = "$JS.API"
    publish: list[str] = [subjects.full(s) for s in rights.publish]
    subscribe: list[str] = [subjects.full(s) for s in rights.subscribe]
    subscribe.append(f"{inbox_prefix(subjects, component)}.>")
    publish.append(subjects.component_ready(component))  # "ready to serve", for `antler up`
    publish.append(subjects.full(f"metrics.{component}.*"))  # its process's metrics (bus.metrics_feed)
    if rights.observe:
        subscribe.append(subjects.metrics_all)
        for other in RIGHTS.values():
            publish += [
                f"{js}.CONSUMER.INFO.{subjects.stream(kind)}.{durable}"
                for kind, durable, _ in per_partition(other.consume)
            ]
    for kind, durable, filter_subject in per_partition(rights.consume):
        stream = subjects.stream(kind)
        publish += [
            f"{js}.STREAM.INFO.{stream}",
            # Only this durable, and only with this filter: nobody redirects another's consumer.
            f"{js}.CONSUMER.CREATE.{stream}.{durable}.{subjects.full(filter_subject)}",
            f"{js}.CONSUMER.INFO.{stream}.{durable}",
            f"{js}.CONSUMER.DELETE.{stream}.{durable}",  # started afresh (a router's partition)
            f"{js}.CONSUMER.MSG.NEXT.{stream}.{durable}",
            f"$JS.ACK.{stream}.{durable}.>",
            subjects.dlq(stream),
        ]
    for kind in rights.read_streams:
        for k in range(MAX_PARTITIONS) if "<k>" in kind else (0,):
            publish += _stream_reads(js, subjects.stream(kind.replace("<k>", str(k))))
    publish += [f"{js}.STREAM.INFO.{subjects.stream(kind)}" for kind in rights.stream_info]
    if rights.read_streams or rights.files:
        # Finding a subject's stream (names only): nats-py's subscribe does it when not told the stream,
        # as ObjectStore.list() / watch() do underneath.
        publish.append(f"{js}.STREAM.NAMES")
    for bucket in rights.kv_write + rights.kv_read:
        for name in _bucket_names(subjects, bucket):
            publish += _stream_reads(js, f"KV_{name}")
    for bucket in rights.kv_write:
        for name in _bucket_names(subjects, bucket):
            publish += [f"$KV.{name}.>", f"{js}.STREAM.PURGE.KV_{name}"]
    if rights.files:
        store = subjects.files_store
        publish += [*_stream_reads(js, f"OBJ_{store}"), f"$O.{store}.>", f"{js}.STREAM.PURGE.OBJ_{store}"]
    for service in rights.serve:
        subscribe.append(subjects.full(f"{service}.>"))
        subscribe += ["$SRV.>"]  # discovery: PING, INFO, STATS
    for service in rights.call:
        publish.append(subjects.full(f"{service}.>"))
    if rights.call:
        publish.append("$SRV.>")
    publish += rights.publish_absolute
    subscribe += rights.subscribe_absolute
    return {
        "publish": {"allow": sorted(set(publish))},
        "subscribe": {"allow": sorted(set(subscribe))},
        # Services answer on the asker's inbox; only the inbox of a message they received.
        "allow_responses": True,
    }


def inbox_prefix(subjects: Subjects, component: str) -> str:
    """Each user's own reply subjects, so no component reads another's replies."""
    return f"_INBOX_{subjects.service_name(component)}"


def user_name(subjects: Subjects, component: str) -> str:
    return subjects.service_name(component)


def generate_users(subjects: Subjects, components: tuple[str, ...] = tuple(RIGHTS)) -> list[NatsUser]:
    """A fresh user with a random password per component, plus the admin."""
    users = [NatsUser(ADMIN, user_name(subjects, ADMIN), secrets.token_urlsafe(24))]
    for component in components:
        users.append(
            NatsUser(
                component,
                user_name(subjects, component),
                secrets.token_urlsafe(24),
                permissions(component, subjects),
            )
        )
    return users


def server_block(users: list[NatsUser]) -> str:
    """nats-server's `authorization { users = [...] }` for these users (JSON is valid NATS config)."""
    entries = []
    for user in users:
        entry: dict[str, object] = {"user": user.user, "password": user.password}
        if user.permissions is not None:
            entry["permissions"] = user.permissions
        entries.append(entry)
    return "authorization: " + json.dumps({"users": entries}, indent=2) + "\n"


def save_users(path: Path, users: list[NatsUser]) -> None:
    """Write the users' credentials, readable by their owner only."""
    data = {u.component: {"user": u.user, "password": u.password} for u in users}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)


def load_credentials(path: Path) -> dict[str, tuple[str, str]]:
    """`component -> (user, password)` from a file `save_users` wrote; empty if there is none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {component: (entry["user"], entry["password"]) for component, entry in data.items()}


def users_for(subjects: Subjects, path: Path) -> list[NatsUser]:
    """The users saved at `path` with their permissions (new passwords for components not saved yet)."""
    saved = load_credentials(path)
    users = generate_users(subjects)
    return [
        NatsUser(u.component, u.user, saved[u.component][1], u.permissions) if u.component in saved else u
        for u in users
    ]
