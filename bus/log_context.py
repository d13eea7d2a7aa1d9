"""Ids on every log line of a unit of work: the run (or subagent task) and, with tracing on, the trace.

    with_run("run-1")                  # in the handler's task: it and the tasks it starts log with it
    handler.addFilter(LogIds())        # entry points (bus.launcher.setup_logging) show them

Each consumer handler runs in a task of its own, so setting the run there reaches every line the run
logs (LangGraph's tasks copy the context) and no other message's. A line outside a run shows nothing
extra; the cost is a context lookup per line logged, nothing per message.
"""

from __future__ import annotations

import contextvars
import logging

from bus import tracing

_run: contextvars.ContextVar[str | None] = contextvars.ContextVar("antler_log_run", default=None)


def with_run(run_id: str | None) -> None:
    """Log the rest of this task (and the tasks it starts) with `run_id`."""
    _run.set(run_id)


class LogIds(logging.Filter):
    """Adds `record.antler_ids`: ` run=<id> trace=<id>` (whichever are known), or ``."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = ""
        run = _run.get()
        if run:
            ids += f" run={run}"
        trace = tracing.current_trace_id()
        if trace:
            ids += f" trace={trace}"
        record.antler_ids = ids
        return True
