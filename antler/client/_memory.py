"""The user's long-term memory, as the gateway's `/api/memory`: read from the `memory` bucket,
changed through the memory updater's `memory` service (the documents' one writer). Documents come
in DeerFlow's memory.json shape. `agent_name` selects a custom agent's memory of the user."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from antler.client._base import Connected
from antler.client.errors import InvalidRequest
from bus import Bus
from bus.messages import (
    MemoryDocument,
    MemoryFactRequest,
    MemoryImportRequest,
    MemoryReply,
    MemoryRequest,
)
from bus.records import RecordStore
from gateway import answers


class Memory(Connected):
    """get/reload/config/status, and the changes DeerFlow's client has (facts, clear, import)."""

    async def _read_memory(self, agent_name: str | None) -> dict[str, Any]:
        async def read(bus: Bus) -> dict[str, Any]:
            store = RecordStore(await bus.kv(bus.subjects.memory_bucket), MemoryDocument)
            doc = await store.get(MemoryDocument.key(self.user_id, agent_name))
            return answers.memory_document(doc or MemoryDocument(user_id=self.user_id, agent_name=agent_name))

        return await self._guarded("read memory", read)

    async def _change_memory(self, endpoint: str, request: MemoryRequest) -> dict[str, Any]:
        reply = await self._ask("memory", endpoint, request, MemoryReply)
        assert reply.document is not None
        return answers.memory_document(reply.document)

    async def get_memory(self, agent_name: str | None = None) -> dict[str, Any]:
        """The memory document (`version`, `lastUpdated`, `user`, `history`, `facts`)."""
        return await self._read_memory(agent_name)

    async def reload_memory(self, agent_name: str | None = None) -> dict[str, Any]:
        """The document as it is now (memory lives in the bus: every read is current)."""
        return await self._read_memory(agent_name)

    async def export_memory(self, agent_name: str | None = None) -> dict[str, Any]:
        return await self._read_memory(agent_name)

    async def import_memory(self, document: dict[str, Any], agent_name: str | None = None) -> dict[str, Any]:
        """Replace the memory with an exported document (duplicate facts merged)."""
        if not isinstance(document, dict):
            raise InvalidRequest("document: an exported memory document (a dict)")
        request = MemoryImportRequest(user_id=self.user_id, agent_name=agent_name, document=document)
        return await self._change_memory("import", request)

    async def clear_memory(self, agent_name: str | None = None) -> dict[str, Any]:
        return await self._change_memory("clear", MemoryRequest(user_id=self.user_id, agent_name=agent_name))

    async def create_memory_fact(
        self,
        content: str,
        category: str = "context",
        confidence: float = 1.0,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        """Add a fact; InvalidRequest if the same fact is there already (or memory is full of surer ones)."""
        if not isinstance(content, str) or not content.strip():
            raise InvalidRequest("content: the fact's text, not empty")
        request = self._fact(agent_name, content=content, category=category, confidence=confidence)
        return await self._change_memory("add_fact", request)

    async def update_memory_fact(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
        agent_name: str | None = None,
    ) -> dict[str, Any]:
        request = self._fact(
            agent_name, fact_id=fact_id, content=content, category=category, confidence=confidence
        )
        return await self._change_memory("update_fact", request)

    async def delete_memory_fact(self, fact_id: str, agent_name: str | None = None) -> dict[str, Any]:
        return await self._change_memory("delete_fact", self._fact(agent_name, fact_id=fact_id))

    def _fact(self, agent_name: str | None, **fields: Any) -> MemoryFactRequest:
        try:
            return MemoryFactRequest(user_id=self.user_id, agent_name=agent_name, **fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidRequest(f"{where}: {first['msg']}") from None

    async def get_memory_config(self) -> dict[str, Any]:
        """Memory's settings: enabled, injection, debounce, model, limits."""
        return answers.memory_config(self.config)

    async def get_memory_status(self, agent_name: str | None = None) -> dict[str, Any]:
        """`{"config": <get_memory_config()>, "data": <get_memory()>}`."""
        return {"config": await self.get_memory_config(), "data": await self._read_memory(agent_name)}
