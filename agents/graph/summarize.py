"""Summarising a thread's older messages: automatically near the model's context window, or on demand.

`ThreadSummarizer` uses LangChain's SummarizationMiddleware for the decisions
(how much to keep, where a safe cut falls, the summary prompt, trimming what is
sent: its protected helpers, as its own hook calls them) with three changes:

- It acts inside the model call, not as a graph node before it.
- Before the older messages are replaced, what they said goes to the memory
  updater (`MemoryFlush`: a MemoryUpdate on `memory.update.<thread>.<flush id>`,
  a subject of its own so the run's own update, which keeps only the newest per
  subject, does not replace it before the updater has read it).
- Its thresholds come from the model's context window: a `fraction` trigger or
  keep is that share of `models[].context_window` (unset:
  `summarization.default_context_window`), so it works for any provider, with
  or without a LangChain model profile.

`compact` is the same code asked by a person (`POST /api/threads/{id}/compact`,
`/compact` in chats: agents.threads.compact): it summarises whatever is older than
what `keep` keeps, whether or not the trigger is reached.

The summary call is tagged `nostream`: its tokens are not part of the answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, SummarizationMiddleware
from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from agents.graph.assembly import memory_turns
from agents.graph.middleware._util import messages_of, with_update
from bus import Bus
from bus.messages import MemoryUpdate
from config import AppConfig, ContextSize
from llm.guard import ModelCalls
from llm.models import create_chat_model

log = logging.getLogger(__name__)


def context_window(config: AppConfig, model_name: str | None) -> int:
    """Tokens the model takes in: its `context_window`, else `summarization.default_context_window`."""
    chosen = config.get_model(model_name)
    if chosen is not None and chosen.context_window:
        return chosen.context_window
    return config.summarization.default_context_window


def in_tokens(size: ContextSize, window: int) -> tuple[str, int]:
    """A size as LangChain takes it, a fraction turned into tokens of `window`."""
    if size.type == "fraction":
        return ("tokens", max(1, int(window * size.value)))
    return (size.type, max(1, int(size.value)))


class MemoryFlush:
    """Hands the messages about to be summarised to the memory updater, through the bus."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def __call__(
        self, messages: list[Any], user_id: str, agent_name: str | None, thread_id: str, run_id: str | None
    ) -> bool:
        """Whether an update went out (nothing to learn from is no failure). Never raises."""
        turns = memory_turns(messages)
        if not any(t.role == "user" for t in turns):
            return False
        flush = uuid.uuid4().hex[:12]
        update = MemoryUpdate(
            user_id=user_id, agent_name=agent_name, thread_id=thread_id, run_id=run_id, messages=turns
        )
        try:
            subject = f"{self.bus.subjects.memory_update(thread_id)}.{flush}"
            await self.bus.publish(subject, update, msg_id=f"memory-flush:{thread_id}:{flush}")
        except Exception as exc:  # memory is best effort; the summary still frees the context
            log.warning("thread %s: could not hand summarised messages to memory: %s", thread_id, exc)
            return False
        log.info("thread %s: %d turn(s) handed to memory before summarising", thread_id, len(turns))
        return True


class ThreadSummarizer(AgentMiddleware):
    """Outermost around the model call (no graph node of its own: a plain turn stays two nodes).

    When the thread's messages reach the trigger, the model is asked with the summary and the
    kept messages, and the state's messages become those plus the answer (a command after the
    model's own update, starting with RemoveMessage(REMOVE_ALL_MESSAGES)). A summary that fails
    is logged and the call goes on unsummarised: the model's own error handling then speaks.
    """

    def __init__(
        self,
        config: AppConfig,
        model: Any,
        model_name: str | None,
        flush: MemoryFlush | None,
        calls: ModelCalls | None = None,
    ) -> None:
        super().__init__()
        summary = config.summarization
        self.window = context_window(config, model_name)
        kwargs: dict[str, Any] = {
            "trigger": [in_tokens(t, self.window) for t in summary.trigger],
            "keep": in_tokens(summary.keep, self.window),
            "trim_tokens_to_summarize": summary.trim_tokens_to_summarize,
        }
        if summary.summary_prompt:
            kwargs["summary_prompt"] = summary.summary_prompt
        writer = create_chat_model(config, summary.model_name) if summary.model_name else model
        # The summary is a model call like any other: within its model's cluster budget.
        self.writer_name = summary.model_name or model_name
        self.calls = calls
        self.engine = SummarizationMiddleware(model, **kwargs)
        # Its tokens are not the answer's: kept out of the streamed messages (as the title's are).
        self.engine._summary_model = writer.with_config({"tags": ["nostream"]}).with_retry(
            stop_after_attempt=2
        )
        self.flush = flush if config.memory.enabled else None

    def due(self, messages: list[AnyMessage]) -> bool:
        return bool(self.engine._should_summarize(messages, self.engine.token_counter(messages)))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        messages = list(request.messages)
        if not messages or not self.due(messages):
            return await handler(request)
        context = request.runtime.context if request.runtime is not None else None
        thread_id = getattr(context, "thread_id", "")
        log.info("thread %s: near its %d-token context window: summarising", thread_id, self.window)
        try:
            update = await self.summarize(
                messages,
                getattr(context, "user_id", "default"),
                getattr(context, "agent_name", None),
                thread_id,
                getattr(context, "run_id", None),
            )
        except Exception as exc:
            log.warning("thread %s: the summary failed, going on without: %s", thread_id, exc)
            return await handler(request)
        if update is None:
            return await handler(request)
        shorter = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
        result = await handler(request.override(messages=shorter))
        answer = messages_of(result)
        for message in answer:
            message.id = message.id or str(uuid.uuid4())
        return with_update(result, {"messages": [*update["messages"], *answer]})

    async def summarize(
        self,
        messages: list[AnyMessage],
        user_id: str,
        agent_name: str | None,
        thread_id: str,
        run_id: str | None,
        *,
        force: bool = False,
    ) -> dict[str, Any] | None:
        """The state update replacing the older messages by their summary (None: nothing to summarise).

        `force` (compact): summarise what `keep` would not keep, or, on a thread shorter than
        that, everything before the last exchange.
        """
        engine = self.engine
        engine._ensure_message_ids(messages)
        cutoff = engine._determine_cutoff_index(messages)
        if force and cutoff <= 0:
            last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
            cutoff = engine._find_safe_cutoff_point(messages, last_human)
        if cutoff <= 0:
            return None
        older, kept = engine._partition_messages(messages, cutoff)
        if self.flush is not None:
            await self.flush(older, user_id, agent_name, thread_id, run_id)
        if self.calls is not None:
            summary = await self.calls.call(self.writer_name, lambda: engine._acreate_summary(older))
        else:
            summary = await engine._acreate_summary(older)
        fresh = engine._build_new_messages(summary)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *fresh, *kept]}
