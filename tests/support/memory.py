"""The memory updater in a test's process, scripting its model and reading what it stored."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from bus import Bus
from bus.messages import MemoryDocument
from bus.records import RecordStore
from config import AppConfig
from memory.updater import run as run_updater
from tests.conftest import running_component, until_answering
from tests.fakes.openai_server import FakeOpenAI, Reply

MEMORY_PROMPT = "long-term memory an AI assistant has"


def memory_reply(*facts: str, work: str | None = None, fenced: bool = False) -> Reply:
    body = {
        "user": {"workContext": {"summary": work or "", "shouldUpdate": work is not None}},
        "newFacts": [{"content": f, "category": "context", "confidence": 0.95} for f in facts],
        "factsToRemove": [],
    }
    text = json.dumps(body)
    return Reply(text=f"Here you go:\n```json\n{text}\n```" if fenced else text, when=MEMORY_PROMPT)


def memory_calls(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.agent_requests if MEMORY_PROMPT in str(r["messages"][-1]["content"])]


async def memory_of(
    bus: Bus, user: str, want: Callable[[MemoryDocument], bool], timeout: float = 60.0
) -> MemoryDocument:
    """The user's memory once `want` holds for it (a component process may take its time to start
    on a busy machine: 10 s were not always enough)."""
    store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
    deadline = time.monotonic() + timeout
    while True:
        doc = await store.get(MemoryDocument.key(user))
        if doc is not None and want(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"the memory of {user} never got there in {timeout:g}s: {doc}")
        await asyncio.sleep(0.05)


def facts(doc: MemoryDocument) -> list[str]:
    return [f.content for f in doc.facts]


def running_updater(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    """The memory updater on its own connection, up once its `memory` service answers."""

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.service_subject("memory", "get"), bus, task)

    return running_component(nats_url, config, run_updater, "memory", ready)
