"""What processes tell about themselves for operators: their metrics and their components' health
(`bus.metrics_feed`, `bus.health`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import Envelope

HealthStatus = Literal["starting", "healthy", "degraded", "unhealthy"]


class ComponentHealth(BaseModel):
    """How one component is doing in one process (`bus.health`)."""

    model_config = ConfigDict(extra="ignore")

    status: HealthStatus = Field(
        description="starting (not serving yet), healthy, degraded (serving, with less than it "
        "should), unhealthy (cannot do its work now: failed and retried, or its platform unreachable)"
    )
    reason: str | None = Field(None, description="why it is not healthy, for people")
    since: datetime = Field(description="when it took this status")
    retry_at: datetime | None = Field(None, description="when it is started again, after a failure")
    failures: int = Field(0, description="times it failed in this process (each one started again)")


class MetricsSnapshot(Envelope):
    """One process's metrics, published every `observability.metrics_interval_seconds` on
    `<prefix>.metrics.<component>.<process>` (core NATS): what the gateway's `/metrics` and
    `antler top` read. Also each process's liveness: a process that stops publishing is gone."""

    process: str = Field(description="host:pid, unique among the installation's live processes")
    host: str
    pid: int
    components: list[str] = Field(description="the components this process runs")
    started_at: datetime
    interval_seconds: float = Field(description="how often this process publishes")
    text: str = Field(description="the process's registry in Prometheus text format 0.0.4")
    health: dict[str, ComponentHealth] = Field(
        default_factory=dict,
        description="each component this process supervises, by name (sent at once when one changes)",
    )
    split_buckets: bool = Field(
        False,
        description="this process uses the threads, runs and thread_runs buckets per partition "
        "(bus.split_kv); `antler provision` moves the single buckets' records only when every "
        "process says so",
    )
