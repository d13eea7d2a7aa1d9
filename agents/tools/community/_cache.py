"""Search results kept for the rest of a run: the same query asked twice in one run costs one request.

Keyed by the run (LangGraph's run metadata `run_id`) and the question; a call
outside a run is not cached. Bounded per process: the oldest runs go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable

MAX_RUNS = 256
MAX_PER_RUN = 64


def current_run() -> str | None:
    try:
        from langgraph.config import get_config

        run_id = (get_config().get("metadata") or {}).get("run_id")
    except RuntimeError:  # not inside a graph run
        return None
    return str(run_id) if run_id else None


class RunCache:
    def __init__(self) -> None:
        self._runs: OrderedDict[str, OrderedDict[Hashable, str]] = OrderedDict()

    async def get_or_make(self, key: Hashable, make: Callable[[], Awaitable[str]]) -> str:
        """The answer kept for `key` in this run, else `make()`'s (kept unless it is an error)."""
        run = current_run()
        if run is None:
            return await make()
        kept = self._runs.get(run)
        if kept is not None and key in kept:
            self._runs.move_to_end(run)
            return kept[key]
        answer = await make()
        if not answer.startswith("Error:"):
            kept = self._runs.setdefault(run, OrderedDict())
            self._runs.move_to_end(run)
            kept[key] = answer
            while len(kept) > MAX_PER_RUN:
                kept.popitem(last=False)
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        return answer
