"""The bus, the runner processes and the gateway: where Antler runs and how it is reached."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config._env import Section
from config.access import OIDCProviderConfig

_SUBJECT_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


_SYNC_INTERVAL = re.compile(r"^(always|\d+(ms|s|m|h))$")


class EmbeddedNatsConfig(Section):
    host: str = Field("127.0.0.1", description="Interface the embedded nats-server listens on.")
    port: int = Field(0, ge=0, le=65535, description="Client port; 0 picks a free port.")
    max_payload_mb: int = Field(8, ge=1, le=64, description="Largest message the server accepts, in MiB.")
    component_users: bool = Field(
        True,
        description="Each component connects as its own NATS user, allowed only the subjects it needs "
        "(credentials in <data_dir>/nats-users.json); false = one user with every right.",
    )
    sync_interval: str = Field(
        "always",
        description="When JetStream writes what it stored to disk (fsync): `always` = before it "
        "acknowledges each message, so nothing acknowledged is lost on a power cut or OS crash. A "
        "duration (`10s`, `2m`: nats-server's own default) is faster under load, but a power cut loses "
        "up to that long of acknowledged chat messages, runs and replies on this one server. See "
        "docs/operating.md (Durability).",
    )

    @field_validator("sync_interval")
    @classmethod
    def _sync_interval_is_always_or_a_duration(cls, value: str) -> str:
        if not _SYNC_INTERVAL.match(value):
            raise ValueError("must be `always` or a duration such as 500ms, 10s, 2m, 1h")
        return value


class BusConfig(Section):
    url: str | None = Field(
        None,
        description="nats:// URL of an existing NATS; several (comma-separated) for a cluster, so a client "
        "reconnects to another server; unset = embedded server.",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=5,
        description="Copies of every stream, KV bucket and the object store: 1 on one server, 3 in a "
        "3-node cluster (one server may die without losing anything).",
    )
    prefix: str = Field("antler", description="First token of every subject; names streams and buckets.")
    data_dir: str = Field(".antler", description="Directory for JetStream, checkpoints and sandboxes.")
    embedded: EmbeddedNatsConfig = Field(default_factory=EmbeddedNatsConfig)
    token: str | None = Field(None, description="Token for an external NATS server.")
    user: str | None = None
    password: str | None = None
    credentials: str | None = Field(None, description="Path of a NATS .creds file.")
    connect_timeout_seconds: float = Field(5.0, gt=0)
    dedupe_window_seconds: float = Field(120.0, gt=0, description="Nats-Msg-Id duplicate window.")
    chat_partitions: int | None = Field(
        None,
        ge=1,
        le=64,  # bus.chat_partitions.MAX: each partition is a stream the components' users may use
        description="Partitions of the chat traffic (inbound messages and chat runs' events, by chat); "
        "each is owned by one router process at a time, so at most this many routers share the work. "
        "Unset: 4 for a new installation, and an existing one keeps the count its streams have. A new "
        "count is applied only while nothing waits in CHAT_IN: see docs/operating.md (Chat routers).",
    )
    lease_seconds: float = Field(
        6.0,
        ge=2,
        description="How long a lease (a router's partition, an adapter's connection or replies) "
        "outlives its holder's last renewal: a dead holder's work is taken over within about this time.",
    )
    restart_delay_seconds: float = Field(
        1.0,
        gt=0,
        description="A component that fails (its platform unreachable, say) is started again after this "
        "pause, doubled after each failure in a row (jittered) up to restart_max_delay_seconds; the "
        "others go on meanwhile.",
    )
    restart_max_delay_seconds: float = Field(
        60.0,
        gt=0,
        description="The longest pause between a failing component's starts; one whose configuration "
        "is wrong (a credential the platform refused) waits five times this.",
    )
    max_deliver: int = Field(5, ge=1, description="Deliveries before a failing message goes to the DLQ.")
    ack_wait_seconds: float = Field(30.0, gt=0, description="Redelivery delay of an un-acked message.")
    run_events_max_age_hours: float = Field(24.0, gt=0, description="How long run event logs are kept.")
    chat_out_max_age_hours: float = Field(24.0, gt=0)
    dlq_max_age_days: float = Field(30.0, gt=0)
    audit_max_age_days: float = Field(
        90.0, gt=0, description="How long the audit trail (stream AUDIT) keeps its records."
    )
    audit_max_mb: int = Field(1024, gt=0, description="The audit trail's size limit (oldest records go).")
    memory_updates_max_age_hours: float = Field(
        168.0, gt=0, description="Conversations waiting for the memory updater longer than this are dropped."
    )
    memory_updates_max_mb: float = Field(
        256.0, gt=0, description="Room for conversations waiting for the memory updater (oldest go first)."
    )
    subagent_results_ttl_hours: float = Field(
        24.0, gt=0, description="How long finished subagent results are kept for a parent run that resumes."
    )

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_subject_token(cls, value: str) -> str:
        if not _SUBJECT_TOKEN.match(value):
            raise ValueError("must be one subject token: letters, digits, '-' or '_'")
        return value


class RunnerConfig(Section):
    concurrency: int = Field(
        1000,
        ge=1,
        description="The most runs one runner process works on at once. Below it, a process takes "
        "more only while it has room (max_loop_lag_ms, max_memory_mb); the rest wait in the queue.",
    )
    max_loop_lag_ms: float = Field(
        100.0,
        gt=0,
        description="A runner process takes no more runs while its event loop runs timers this late "
        "(smoothed): it is short of CPU, and another process, or this one later, takes them.",
    )
    max_memory_mb: int = Field(
        0,
        ge=0,
        description="A runner process takes no more runs while its resident memory is above this; "
        "0: an equal share, among the runner processes, of half the machine's memory.",
    )
    processes: int = Field(
        0,
        ge=0,
        description="Runner processes `antler up` starts (they share the work); 1 = inside `antler up` "
        "itself; 0 = one per CPU core, at most 4.",
    )
    fork_processes: bool = Field(
        True,
        description="On Linux, `antler up` forks its runner processes from one that loaded the libraries, "
        "so they share that memory; false = each starts on its own (the way before).",
    )
    run_timeout_seconds: float = Field(
        3600.0, gt=0, description="A run longer than this is stopped (timeout)."
    )
    drain_seconds: float = Field(
        15.0,
        gt=0,
        le=25,
        description="On stop, runs get this long to finish; the rest go back to the bus and resume "
        "elsewhere (or after the restart) from their checkpoints. Within antler up's 30 s grace.",
    )
    recursion_limit: int = Field(100, ge=1, description="Most graph steps in one run.")
    checkpointer: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="Where conversation checkpoints live: sqlite = a file on this machine; postgres = a "
        "shared database, so runners on several machines resume each other's runs.",
    )
    checkpoint_db: str | None = Field(
        None, description="SQLite file for checkpoints; default <bus.data_dir>/checkpoints.sqlite."
    )
    postgres_url: str | None = Field(
        None, description="postgresql:// URL of the checkpoint database (with checkpointer: postgres)."
    )
    postgres_pool_size: int = Field(
        10, ge=1, description="Most connections one process keeps to the checkpoint database."
    )

    @model_validator(mode="after")
    def _postgres_needs_a_url(self) -> RunnerConfig:
        if self.checkpointer == "postgres" and not self.postgres_url:
            raise ValueError("checkpointer: postgres needs runner.postgres_url (a postgresql:// URL)")
        return self


class GatewayToken(Section):
    token: str
    user_id: str
    admin: bool = Field(
        False, description="May change what runs on the servers: MCP servers (their commands, env, URLs)."
    )


class AuthConfig(Section):
    """Accounts with sign-in for browsers (DeerFlow's web UI); bearer tokens work beside them."""

    allow_registration: bool = Field(
        False, description="Visitors may create their own (non-admin) account from the sign-in page."
    )
    allow_initialize: bool = Field(
        True,
        description="While no account exists, the web UI's setup page may create the first admin; "
        "false = accounts only from `antler user add`.",
    )
    session_days: float = Field(7.0, gt=0, description="How long a sign-in lasts.")
    session_secret: str | None = Field(
        None,
        description="Key signing session cookies (e.g. $ANTLER_SESSION_SECRET); unset = one made once "
        "and kept on the bus, shared by every gateway.",
    )
    max_login_failures: int = Field(
        5, ge=1, description="Failed sign-ins (per account, and per client address) before a lockout."
    )
    lockout_minutes: float = Field(5.0, gt=0, description="How long a lockout lasts after the last failure.")
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of your reverse proxies; only from them is X-Forwarded-For "
        "believed (for the per-address lockout) and X-Forwarded-Proto (for Secure cookies).",
    )
    secure_cookies: bool | None = Field(
        None, description="Mark cookies Secure; null = when the request came over HTTPS."
    )
    local_passwords: bool = Field(
        True, description="Accounts may sign in with a password; false = single sign-on only."
    )
    oidc: list[OIDCProviderConfig] = Field(
        default_factory=list, description="OpenID Connect identity providers for single sign-on."
    )

    @field_validator("oidc")
    @classmethod
    def _unique_providers(cls, value: list[OIDCProviderConfig]) -> list[OIDCProviderConfig]:
        names = [p.name for p in value]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two identity providers are named {name!r}")
        return value


class GatewayConfig(Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(2026, ge=0, le=65535)
    tokens: list[GatewayToken] = Field(
        default_factory=list, description="Bearer tokens; empty = loopback only."
    )
    cors_origins: list[str] = Field(default_factory=list)
    docs_enabled: bool = True
    max_upload_mb: int = Field(50, gt=0)
    auth: AuthConfig = Field(default_factory=AuthConfig)
