"""Langfuse's LangChain callback, as Antler's agent runs need it (imported only when Langfuse is on).

Two things differ from the handler as it comes:

- Its own OpenTelemetry tracer provider. Left alone, the Langfuse client takes the process's global
  provider (or installs itself as it): with Antler's own tracing on (`bus.tracing`), Langfuse's
  spans would go to the OTLP collector and Antler's `chat`/`execute_tool` spans to Langfuse, twice.
- Parents it never saw. LangChain's agent traces each middleware hook (`X.awrap_model_call`,
  `X.awrap_tool_call`) with LangSmith's `traceable`, not with callbacks; with LangSmith on as well,
  a model or tool call's `parent_run_id` is such a hook, unknown to this handler, which would start
  a new trace for it (no session, no user). Such a parent is replaced by its nearest ancestor the
  handler knows, found in the LangSmith run tree's dotted order (every ancestor's run id in turn).

At the end of a run (its root chain) the spans are flushed in a thread of their own, at most one at a
time, so a turn shows in Langfuse at once rather than at the next flush interval, and the run does
not wait for the service.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any
from uuid import UUID

from langfuse import Langfuse
from langfuse.langchain import CallbackHandler
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

log = logging.getLogger(__name__)


def _ancestors(dotted_order: str) -> list[UUID]:
    """The run ids in a LangSmith dotted order (`<time>Z<run id>` per level, root first)."""
    found = []
    for level in dotted_order.split("."):
        _, _, run_id = level.partition("Z")
        try:
            found.append(UUID(run_id))
        except ValueError:
            return []
    return found


class AntlerLangfuseHandler(CallbackHandler):
    """`CallbackHandler` whose unseen parents are their nearest seen ancestor; flushes after a run."""

    def __init__(self, client: Langfuse, *, public_key: str) -> None:
        super().__init__(public_key=public_key)
        self._client = client
        self._flushing = threading.Lock()

    def _known(self, parent_run_id: UUID | None) -> UUID | None:
        runs = getattr(self, "_runs", None)
        if parent_run_id is None or runs is None or parent_run_id in runs:
            return parent_run_id
        from langsmith.run_helpers import get_current_run_tree

        tree = get_current_run_tree()  # the caller's context: the hook that called the model or tool
        if tree is None or tree.id != parent_run_id:
            return parent_run_id
        for ancestor in reversed(_ancestors(tree.dotted_order)):
            if ancestor in runs:
                return ancestor
        return parent_run_id

    def on_chain_start(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        return super().on_chain_start(*args, parent_run_id=self._known(parent_run_id), **kwargs)

    def on_chat_model_start(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        return super().on_chat_model_start(*args, parent_run_id=self._known(parent_run_id), **kwargs)

    def on_llm_start(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        return super().on_llm_start(*args, parent_run_id=self._known(parent_run_id), **kwargs)

    def on_tool_start(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        return super().on_tool_start(*args, parent_run_id=self._known(parent_run_id), **kwargs)

    def on_retriever_start(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        return super().on_retriever_start(*args, parent_run_id=self._known(parent_run_id), **kwargs)

    async def on_llm_new_token(  # type: ignore[override]  # async on purpose: see the docstring
        self, token: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """On the event loop, not a thread hop per streamed token (LangChain runs a handler's sync
        methods in an executor): only a generation's first token is noted, which is cheap."""
        super().on_llm_new_token(token, run_id=run_id, parent_run_id=parent_run_id, **kwargs)

    def on_chain_end(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        try:
            return super().on_chain_end(*args, parent_run_id=parent_run_id, **kwargs)
        finally:
            if parent_run_id is None:
                self._flush_soon()

    def on_chain_error(self, *args: Any, parent_run_id: UUID | None = None, **kwargs: Any) -> Any:
        try:
            return super().on_chain_error(*args, parent_run_id=parent_run_id, **kwargs)
        finally:
            if parent_run_id is None:
                self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flushing.acquire(blocking=False):  # one already under way takes these spans too
            threading.Thread(target=self._flush, name="langfuse-flush", daemon=True).start()

    def _flush(self) -> None:
        try:
            self._client.flush()
        except Exception as exc:  # the exporter logs its own failures; anything else, once here
            log.warning("Langfuse flush failed: %s: %s", type(exc).__name__, exc)
        finally:
            self._flushing.release()


def langfuse_handler(*, public_key: str, secret_key: str, base_url: str) -> AntlerLangfuseHandler:
    """The process's Langfuse client (registered under its public key) and a handler reporting to it.

    Raises:
        ValueError: LANGFUSE_SAMPLE_RATE is not a number.
    """
    # What Langfuse's own provider would sample (it reads LANGFUSE_SAMPLE_RATE only for a provider it makes).
    rate = float(os.environ.get("LANGFUSE_SAMPLE_RATE") or 1.0)
    provider = TracerProvider(sampler=TraceIdRatioBased(rate) if rate < 1 else None)
    client = Langfuse(
        public_key=public_key, secret_key=secret_key, base_url=base_url, tracer_provider=provider
    )
    return AntlerLangfuseHandler(client, public_key=public_key)
