"""Compacting a thread on demand (`threads.compact`): the summarization of agents.graph.summarize, asked by a
person (`POST /api/threads/{id}/compact`, `/compact` in chats, the web UI's button).

It runs in the threads service, beside the checkpoints: the thread's messages
older than what `summarization.keep` keeps (or, on a short thread, all before
the last exchange) are handed to memory, then replaced by their summary in a
new checkpoint; the history before it stays readable. A thread with a run in
progress is refused (409): that run would write over the compaction.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately

from agents.graph.middleware.person_budget import PersonMeter
from agents.graph.summarize import MemoryFlush, ThreadSummarizer
from agents.threads.snapshots import checkpoint_config
from bus import Bus
from bus.messages import ThreadCompactReply, ThreadCompactRequest, ThreadRecord
from bus.records import RecordStore
from bus.service import ServiceError
from config import AppConfig
from llm.guard import ModelCalls
from llm.models import create_chat_model

log = logging.getLogger(__name__)


async def compact_thread(
    req: ThreadCompactRequest,
    config: AppConfig,
    bus: Bus,
    threads: RecordStore[ThreadRecord],
    graph: Any,
    calls: ModelCalls,
    meter: PersonMeter,
) -> ThreadCompactReply:
    """Compact the thread through `graph` (the threads service's state graph), its summary written
    with `calls`' budget (and counted by `meter` against the person's) and its older messages handed
    to memory on `bus`.

    Raises:
        ServiceError: not_found (not the caller's), conflict (a run is on it), invalid (model).
    """
    if req.model_name is not None and config.get_model(req.model_name) is None:
        raise ServiceError(f"model_name: no model named {req.model_name!r}", "invalid")
    record = await threads.get(req.thread_id)
    if record is None or record.user_id != req.user_id:
        raise ServiceError(f"thread {req.thread_id} not found", "not_found")
    if record.status == "busy" or record.queue:
        raise ServiceError(
            f"thread {req.thread_id} has a run in progress; compact it after the run finishes", "conflict"
        )

    def reply(compacted: bool, reason: str | None = None, **counts: Any) -> ThreadCompactReply:
        return ThreadCompactReply(thread_id=req.thread_id, compacted=compacted, reason=reason, **counts)

    where = checkpoint_config(req.thread_id)
    snapshot = await graph.aget_state(where)
    messages = list((snapshot.values or {}).get("messages") or [])
    if len(messages) < 2:
        return reply(False, "the thread has nothing to compact yet")
    model = create_chat_model(config, req.model_name)
    summarizer = ThreadSummarizer(config, model, req.model_name, MemoryFlush(bus), calls)
    try:
        async with meter.counting(req.user_id):  # the summary is the person's call
            update = await summarizer.summarize(
                messages, req.user_id, req.agent_name, req.thread_id, None, force=True
            )
    except Exception as exc:
        log.warning("thread %s: compaction failed: %s", req.thread_id, exc)
        raise ServiceError(f"the summary could not be written: {exc}", "model_failed") from None
    if update is None:
        return reply(False, "the thread is too short to compact")
    kept = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
    preserved = len(kept) - 1  # the first is the summary
    written = await graph.aupdate_state(where, update, as_node="model")
    log.info("thread %s compacted: %d message(s) summarised", req.thread_id, len(messages) - preserved)
    return reply(
        True,
        removed_message_count=len(messages) - preserved,
        preserved_message_count=preserved,
        summary_updated=True,
        checkpoint_id=written.get("configurable", {}).get("checkpoint_id"),
        total_tokens=count_tokens_approximately(kept),
    )
