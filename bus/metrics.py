"""Antler's Prometheus metrics: every family defined once, here, and counted where the work is done.

Each process counts into prometheus_client's default registry (`REGISTRY`); nothing here does
I/O. How the counts reach Prometheus is `bus.metrics_feed`: every process publishes its registry
on the bus, and the gateway serves all of them, merged, at `GET /metrics` (one scrape target
for a deployment of any number of processes and machines).

Names follow Prometheus (`_total`, `_seconds`, base units) and, for model calls, the OpenTelemetry
GenAI conventions as Prometheus spells them (`gen_ai.client.operation.duration` ->
`gen_ai_client_operation_duration_seconds`, attributes as labels with `_` for `.`). Labels have
few values (outcomes, model names, tool names, platforms), never ids.

Counting costs a dict lookup and a lock per call: cheap enough for every model call and tool call.
"""

from __future__ import annotations

import functools
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics

__all__ = [
    "CHAT_RATE_LIMITED",
    "CHAT_REPLIES",
    "CONSUMER_IN_FLIGHT",
    "DEAD_LETTERS",
    "MEMORY_UPDATES",
    "MODEL_DURATION",
    "MODEL_FIRST_CHUNK",
    "MODEL_TOKENS",
    "REGISTRY",
    "RUNS_FINISHED",
    "RUNS_RUNNING",
    "RUN_DURATION",
    "RUN_QUEUE_WAIT",
    "SANDBOX_COMMANDS",
    "SANDBOX_COMMAND_DURATION",
    "SANDBOX_REFUSALS",
    "SCHEDULE_FIRINGS",
    "TOOL_CALLS",
    "TOOL_DURATION",
    "dead_letter_reason",
    "labelled",
]

# `_created` series double every counter's series and say nothing a restart's reset does not.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated

# The GenAI conventions' advised buckets: seconds for durations, powers of 4 for tokens.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
# Runs and queue waits are longer than one model call: up to the run time limit.
RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

# ---------------------------------------------------------------------- runs (agent runner)

RUNS_FINISHED = Counter(
    "antler_runs_finished", "Runs ended by this process, by outcome (the run's final status)", ["outcome"]
)
RUNS_RUNNING = Gauge("antler_runs_running", "Runs this process is running now")
RUN_QUEUE_WAIT = Histogram(
    "antler_run_queue_wait_seconds",
    "From a run's submission to its first attempt starting (queue wait before a runner takes it)",
    buckets=RUN_BUCKETS,
)
RUN_DURATION = Histogram(
    "antler_run_duration_seconds",
    "A run attempt's time in this process, from taking it to its end, by outcome",
    ["outcome"],
    buckets=RUN_BUCKETS,
)

# ---------------------------------------------------------------------- model calls (GenAI conventions)

_MODEL = ["gen_ai_operation_name", "gen_ai_request_model"]
MODEL_DURATION = Histogram(
    "gen_ai_client_operation_duration_seconds",
    "GenAI operation duration (one model call, retries included), by model and error type",
    [*_MODEL, "error_type"],
    buckets=DURATION_BUCKETS,
)
MODEL_FIRST_CHUNK = Histogram(
    "gen_ai_client_operation_time_to_first_chunk_seconds",
    "Time from a streamed model call's start to its first chunk",
    _MODEL,
    buckets=DURATION_BUCKETS,
)
MODEL_TOKENS = Histogram(
    "gen_ai_client_token_usage",
    "Tokens used per model call, by model and token type (input, output)",
    [*_MODEL, "gen_ai_token_type"],
    buckets=TOKEN_BUCKETS,
)

# ---------------------------------------------------------------------- tools and the sandbox

TOOL_CALLS = Counter(
    "antler_tool_calls",
    "Tool calls by agents, by tool and outcome (ok, error)",
    ["gen_ai_tool_name", "outcome"],
)
TOOL_DURATION = Histogram(
    "antler_tool_call_duration_seconds",
    "Tool call duration, by tool",
    ["gen_ai_tool_name"],
    buckets=DURATION_BUCKETS,
)
SANDBOX_COMMANDS = Counter(
    "antler_sandbox_commands", "Sandbox commands run, by outcome (ok, failed, timed_out)", ["outcome"]
)
SANDBOX_COMMAND_DURATION = Histogram(
    "antler_sandbox_command_duration_seconds",
    "Sandbox command duration, from the request to the reply (waiting for a slot included)",
    buckets=RUN_BUCKETS,
)
SANDBOX_REFUSALS = Counter(
    "antler_sandbox_refusals", "Sandbox commands refused, by reason (policy, invalid, too_large)", ["reason"]
)

# ---------------------------------------------------------------------- the bus

DEAD_LETTERS = Counter(
    "antler_dead_letters",
    "Messages dead-lettered, by stream, consumer and reason (bad_input, rejected, failed, unsettled)",
    ["stream", "consumer", "reason"],
)
CONSUMER_IN_FLIGHT = Gauge(
    "antler_consumer_in_flight_messages", "Messages this process's consumer is handling now", ["durable"]
)

# ---------------------------------------------------------------------- chats, memory, schedules

CHAT_REPLIES = Counter(
    "antler_chat_replies",
    "Final chat replies, by platform and outcome (delivered, failed)",
    ["platform", "outcome"],
)
CHAT_RATE_LIMITED = Counter(
    "antler_chat_rate_limited", "Times a platform's rate limit held a reply back, by platform", ["platform"]
)
MEMORY_UPDATES = Counter(
    "antler_memory_updates", "Memory updates handled, by outcome (updated, unchanged, failed)", ["outcome"]
)
SCHEDULE_FIRINGS = Counter(
    "antler_schedule_firings", "Scheduled firings, by outcome (started, skipped, dropped)", ["outcome"]
)


def dead_letter_reason(reason: str) -> str:
    """A dead letter's free-text reason as one of a few label values (`bus.consumer` writes them)."""
    for prefix, label in (
        ("bad input", "bad_input"),
        ("rejected", "rejected"),
        ("failed", "failed"),
        ("delivered", "unsettled"),
    ):
        if reason.startswith(prefix):
            return label
    return "other"


@functools.lru_cache(maxsize=4096)
def labelled(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, remembered: prometheus_client checks and locks on every `labels()`
    (microseconds); the hot paths (each model call, tool call, run) look their child up here instead."""
    return metric.labels(*values)
