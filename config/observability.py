"""What Antler tells operators about itself: metrics on the bus (`bus.metrics_feed`)."""

from __future__ import annotations

from pydantic import Field

from config._env import Section


class ObservabilityConfig(Section):
    metrics_interval_seconds: float = Field(
        5.0,
        ge=0,
        description="How often each process publishes its metrics on the bus (the gateway's /metrics and "
        "`antler top` read them); 0 = never (the gateway's /metrics then shows its own process only).",
    )
    tracing: bool | None = Field(
        None,
        description="OpenTelemetry traces across the bus, exported by each process over OTLP (or as "
        "OTEL_TRACES_EXPORTER says); null = on when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT "
        "is set.",
    )
    langsmith: bool | None = Field(
        None,
        description="LangSmith traces of every agent run (LANGSMITH_API_KEY, LANGSMITH_PROJECT, "
        "LANGSMITH_ENDPOINT from the environment); null = on when LANGSMITH_TRACING is true.",
    )
    langfuse: bool | None = Field(
        None,
        description="Langfuse traces of every agent run (LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, "
        "LANGFUSE_BASE_URL from the environment); null = on when LANGFUSE_TRACING is true.",
    )
