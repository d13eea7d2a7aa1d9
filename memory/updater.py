"""The memory updater: conversations in, revised memory documents out (`antler run memory`).

A durable consumer of `<prefix>.memory.update.<thread>`. The stream keeps only
the newest update of each thread, so runs in quick succession collapse into
one; the handler waits until the newest has been quiet for
`memory.debounce_seconds` (the message stays unacknowledged on the bus while
it waits, so a restart loses nothing), then asks the memory model to revise
the user's document and writes it to KV `<prefix>_memory` with a
compare-and-set: a concurrent writer's change is read back and this change
applied to it again, never overwritten.

It also serves the `memory` micro service, through which the gateway reads
and edits documents: the updater is the only writer of memory documents.
"""

from __future__ import annotations

import logging
from typing import Any

from nats.js.errors import NotFoundError

from bus import Bus, Consumer, Defer, Delivery, run_consumers
from bus.content import text_of
from bus.messages import MemoryDocument, MemoryUpdate, utcnow
from bus.metrics import MEMORY_UPDATES
from bus.records import RecordStore
from config import AppConfig
from llm.guard import ModelCalls
from llm.tracing_services import run_callbacks
from memory.document import apply, conversation
from memory.extract import parse, prompt
from memory.service import serve_memory

log = logging.getLogger(__name__)

DURABLE = "memory"
MODEL_CALLS = 8  # memory model calls one updater process makes at once


class MemoryUpdater:
    def __init__(self, bus: Bus, config: AppConfig, documents: RecordStore[MemoryDocument]) -> None:
        self.bus = bus
        self.config = config
        self.documents = documents
        self._model: Any = None
        self.calls = ModelCalls(bus, config)  # the memory model's cluster budget, and retries
        self.callbacks: list[Any] = []  # the tracing services' handlers (`run`), as agent runs carry them

    def model(self) -> Any:
        """The memory model (`memory.model_name`, else the default model), built once.

        Raises:
            llm.errors.ModelConfigError, config.MissingEnvError
        """
        if self._model is None:
            from llm.models import create_chat_model

            self._model = create_chat_model(self.config, self.config.memory.model_name)
        return self._model

    def _run_config(self, update: MemoryUpdate) -> dict[str, Any] | None:
        """The model call's RunnableConfig when a tracing service is on (None otherwise)."""
        if not self.callbacks:
            return None
        return {
            "callbacks": self.callbacks,
            "run_name": "memory_update",
            "metadata": {"thread_id": update.thread_id, "user_id": update.user_id, "agent": "memory"},
        }

    async def handle(self, update: MemoryUpdate, delivery: Delivery) -> None:
        try:
            await self._revise(update, delivery)
        except Defer:
            raise
        except Exception:  # tried again by the consumer
            MEMORY_UPDATES.labels("failed").inc()
            raise

    async def _revise(self, update: MemoryUpdate, delivery: Delivery) -> None:
        settings = self.config.memory
        if not settings.enabled:
            return
        quiet = settings.debounce_seconds - (utcnow() - update.created_at).total_seconds()
        if quiet > 0:
            raise Defer(quiet)  # back when the thread has been quiet long enough; on the bus meanwhile
        if not await self._newest(delivery):
            log.debug("memory update of thread %s superseded by a newer one", update.thread_id)
            return
        turns = conversation(update.messages)
        if not any(t.role == "user" for t in turns):
            return
        key = MemoryDocument.key(update.user_id, update.agent_name)
        current = await self.documents.get(key) or MemoryDocument(
            user_id=update.user_id, agent_name=update.agent_name
        )
        model = self.model()
        messages = prompt(current, turns)
        reply = await self.calls.call(
            settings.model_name,
            lambda: model.ainvoke(messages, self._run_config(update)),
            tokens=lambda answer: int((getattr(answer, "usage_metadata", None) or {}).get("total_tokens", 0)),
        )
        change = parse(text_of(reply.content, sep=""))
        if change.dropped:
            log.warning("memory reply for %s: dropped %s", update.user_id, "; ".join(change.dropped))
        if change.empty:
            MEMORY_UPDATES.labels("unchanged").inc()
            return
        now = utcnow()

        def revise(doc: MemoryDocument | None) -> MemoryDocument:
            base = doc or MemoryDocument(user_id=update.user_id, agent_name=update.agent_name)
            return apply(
                base,
                change,
                source=update.thread_id,
                threshold=settings.fact_confidence_threshold,
                max_facts=settings.max_facts,
                now=now,
            )

        await self.documents.update(key, revise)
        MEMORY_UPDATES.labels("updated").inc()
        log.info("memory of %s revised from thread %s", update.user_id, update.thread_id)

    async def _newest(self, delivery: Delivery) -> bool:
        """Whether this is still the thread's newest update (the stream keeps one per thread)."""
        try:
            last = await self.bus.js.get_last_msg(self.bus.subjects.memory_stream, delivery.subject)
        except NotFoundError:
            return False
        return last.seq == delivery.stream_seq


async def run(bus: Bus, config: AppConfig) -> None:
    """The memory updater component: the update consumer and the memory service, until cancelled."""
    documents = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
    updater = MemoryUpdater(bus, config, documents)
    # `observability.langsmith: false` must hold here too: LangChain would trace this process's model
    # calls on LANGSMITH_TRACING by itself (run_callbacks switches that off, as for agent runs).
    updater.callbacks = await run_callbacks(config)
    await updater.calls.start()
    service = await serve_memory(bus, config, documents)
    s = bus.subjects
    try:
        await run_consumers(
            Consumer(
                bus,
                stream=s.memory_stream,
                durable=DURABLE,
                filter_subjects=[s.memory_update_all],
                model=MemoryUpdate,
                handler=updater.handle,
                concurrency=MODEL_CALLS,
                max_deliver=config.bus.max_deliver + 1,  # the debounce defers each update once
                # Updates waiting out their debounce are pending acks.
                max_ack_pending=10_000,
            )
        )
    finally:
        await service.stop()
        await updater.calls.close()
