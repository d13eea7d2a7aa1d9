"""The `memory` micro service: read and edit one user's memory document (the gateway's memory API).

Endpoints (`<prefix>.memory.<name>`): get, clear, add_fact, update_fact,
delete_fact, import. Every change is a compare-and-set on KV `<prefix>_memory`,
so an edit and the updater's revision never lose each other's work.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bus import Bus
from bus.messages import (
    MemoryDocument,
    MemoryFact,
    MemoryFactRequest,
    MemoryImportRequest,
    MemoryReply,
    MemoryRequest,
    utcnow,
)
from bus.records import RecordStore
from bus.service import Endpoint, Running, ServiceError, start_service
from config import AppConfig
from memory.document import capped, normalized


class MemoryService:
    def __init__(self, config: AppConfig, documents: RecordStore[MemoryDocument]) -> None:
        self.config = config
        self.documents = documents

    @staticmethod
    def _empty(req: MemoryRequest) -> MemoryDocument:
        return MemoryDocument(user_id=req.user_id, agent_name=req.agent_name)

    async def get(self, req: MemoryRequest) -> MemoryReply:
        doc = await self.documents.get(MemoryDocument.key(req.user_id, req.agent_name))
        return MemoryReply(document=doc or self._empty(req))

    async def clear(self, req: MemoryRequest) -> MemoryReply:
        empty = self._empty(req)
        await self.documents.put(MemoryDocument.key(req.user_id, req.agent_name), empty)
        return MemoryReply(document=empty)

    async def add_fact(self, req: MemoryFactRequest) -> MemoryReply:
        content = " ".join((req.content or "").split())
        if not content:
            raise ServiceError("a fact needs its content", "invalid")
        fact = MemoryFact(
            content=content,
            category=req.category or "context",
            confidence=req.confidence if req.confidence is not None else 1.0,
            source="manual",
        )

        def add(doc: MemoryDocument) -> MemoryDocument:
            if any(normalized(f.content) == normalized(content) for f in doc.facts):
                raise ServiceError("a fact with the same content is already there", "conflict")
            doc.facts = capped([*doc.facts, fact], self.config.memory.max_facts)
            if fact not in doc.facts:
                raise ServiceError(
                    f"memory is full ({self.config.memory.max_facts} facts, memory.max_facts) and this "
                    "fact is less certain than all of them; delete one first",
                    "conflict",
                )
            return doc

        return await self._change(req, add)

    async def update_fact(self, req: MemoryFactRequest) -> MemoryReply:
        changes: dict[str, Any] = {}
        if req.content is not None:
            if not req.content.strip():
                raise ServiceError("a fact needs its content", "invalid")
            changes["content"] = " ".join(req.content.split())
        if req.category is not None:
            changes["category"] = req.category
        if req.confidence is not None:
            changes["confidence"] = req.confidence

        def update(doc: MemoryDocument) -> MemoryDocument:
            index = self._find(doc, req.fact_id)
            doc.facts[index] = doc.facts[index].model_copy(update=changes)
            return doc

        return await self._change(req, update)

    async def delete_fact(self, req: MemoryFactRequest) -> MemoryReply:
        def delete(doc: MemoryDocument) -> MemoryDocument:
            doc.facts.pop(self._find(doc, req.fact_id))
            return doc

        return await self._change(req, delete)

    async def import_(self, req: MemoryImportRequest) -> MemoryReply:
        raw = {**req.document, "user_id": req.user_id, "agent_name": req.agent_name}
        try:
            doc = MemoryDocument.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            raise ServiceError(f"not a memory document: {problems}", "invalid") from None
        seen: set[str] = set()
        unique = []
        for fact in doc.facts:
            if normalized(fact.content) not in seen:
                seen.add(normalized(fact.content))
                unique.append(fact)
        doc.facts = capped(unique, self.config.memory.max_facts)
        doc.last_updated = utcnow()
        await self.documents.put(MemoryDocument.key(req.user_id, req.agent_name), doc)
        return MemoryReply(document=doc)

    @staticmethod
    def _find(doc: MemoryDocument, fact_id: str | None) -> int:
        for index, fact in enumerate(doc.facts):
            if fact.id == fact_id:
                return index
        raise ServiceError(f"no fact {fact_id!r} in this memory", "not_found")

    async def _change(self, req: MemoryRequest, change: Any) -> MemoryReply:
        def revise(doc: MemoryDocument | None) -> MemoryDocument:
            revised = change((doc or self._empty(req)).model_copy(deep=True))
            revised.last_updated = utcnow()
            return revised  # type: ignore[no-any-return]  # `change` is one of this service's edits

        doc = await self.documents.update(MemoryDocument.key(req.user_id, req.agent_name), revise)
        return MemoryReply(document=doc)


async def serve_memory(bus: Bus, config: AppConfig, documents: RecordStore[MemoryDocument]) -> Running:
    memory = MemoryService(config, documents)
    endpoints: list[Endpoint[Any, Any]] = [
        Endpoint("get", MemoryRequest, MemoryReply, memory.get),
        Endpoint("clear", MemoryRequest, MemoryReply, memory.clear),
        Endpoint("add_fact", MemoryFactRequest, MemoryReply, memory.add_fact),
        Endpoint("update_fact", MemoryFactRequest, MemoryReply, memory.update_fact),
        Endpoint("delete_fact", MemoryFactRequest, MemoryReply, memory.delete_fact),
        Endpoint("import", MemoryImportRequest, MemoryReply, memory.import_),
    ]
    return await start_service(
        bus, "memory", endpoints, description="Users' long-term memory documents (the memory updater)"
    )
