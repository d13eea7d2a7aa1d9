"""What processes tell about themselves for operators: their metrics (`bus.metrics_feed`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from bus.messages.base import Envelope


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
