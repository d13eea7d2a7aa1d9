"""DeerFlow's memory API, for the caller's own memory: `/api/memory`.

GET /api/memory (also /export, /reload), DELETE /api/memory, POST /api/memory/facts,
PATCH and DELETE /api/memory/facts/{id}, POST /api/memory/import, GET /api/memory/config,
GET /api/memory/status. Documents come back in DeerFlow's memory.json shape
(`user.workContext`, `history.recentMonths`, `facts[].createdAt`, `lastUpdated`).
Reads come from KV; changes go to the memory updater's `memory` service, the
documents' one writer. `agent_name` (a query parameter) selects a custom
agent's memory of the caller instead of their own.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from bus.messages import (
    FactCategory,
    MemoryDocument,
    MemoryFactRequest,
    MemoryImportRequest,
    MemoryReply,
    MemoryRequest,
)
from bus.records import RecordStore
from bus.service import call
from gateway import answers
from gateway.answers import memory_document
from gateway.deps import GW, Me, http_error
from gateway.schemas import errors

router = APIRouter()


async def _read(gw: GW, me: str, agent_name: str | None) -> dict[str, Any]:
    store = RecordStore(await gw.bus.kv(gw.bus.subjects.memory_bucket), MemoryDocument)
    doc = await store.get(MemoryDocument.key(me, agent_name))
    return memory_document(doc or MemoryDocument(user_id=me, agent_name=agent_name))


async def _change(gw: GW, endpoint: str, request: MemoryRequest) -> dict[str, Any]:
    reply = await call(
        gw.bus,
        "memory",
        endpoint,
        request,
        MemoryReply,
        timeout=30,
        errors=http_error,
        unavailable="no memory updater is running (antler up starts one; or antler run memory)",
    )
    assert reply.document is not None
    return memory_document(reply.document)


@router.get("/memory")
async def get_memory(gw: GW, me: Me, agent_name: str | None = None) -> dict[str, Any]:
    return await _read(gw, me, agent_name)


@router.get("/memory/export")
async def export_memory(gw: GW, me: Me, agent_name: str | None = None) -> dict[str, Any]:
    """The document, to keep or to import elsewhere (`POST /api/memory/import`)."""
    return await _read(gw, me, agent_name)


@router.post("/memory/reload")
async def reload_memory(gw: GW, me: Me, agent_name: str | None = None) -> dict[str, Any]:
    return await _read(gw, me, agent_name)  # memory lives in KV: every read is current


@router.delete("/memory", responses=errors(503))
async def clear_memory(gw: GW, me: Me, agent_name: str | None = None) -> dict[str, Any]:
    return await _change(gw, "clear", MemoryRequest(user_id=me, agent_name=agent_name))


class FactCreate(BaseModel):
    content: str = Field(min_length=1, max_length=4000)
    category: FactCategory = "context"
    confidence: float = Field(1.0, ge=0, le=1, strict=True)


class FactPatch(BaseModel):
    content: str | None = Field(None, min_length=1, max_length=4000)
    category: FactCategory | None = None
    confidence: float | None = Field(None, ge=0, le=1, strict=True)


@router.post("/memory/facts", responses=errors(409, 503))
async def add_fact(gw: GW, me: Me, body: FactCreate, agent_name: str | None = None) -> dict[str, Any]:
    """Add a fact; 409 if the same fact is already there (or memory is full of surer ones)."""
    request = MemoryFactRequest(user_id=me, agent_name=agent_name, **body.model_dump())
    return await _change(gw, "add_fact", request)


@router.patch("/memory/facts/{fact_id}", responses=errors(404, 503))
async def update_fact(
    gw: GW, me: Me, fact_id: str, body: FactPatch, agent_name: str | None = None
) -> dict[str, Any]:
    request = MemoryFactRequest(user_id=me, agent_name=agent_name, fact_id=fact_id, **body.model_dump())
    return await _change(gw, "update_fact", request)


@router.delete("/memory/facts/{fact_id}", responses=errors(404, 503))
async def delete_fact(gw: GW, me: Me, fact_id: str, agent_name: str | None = None) -> dict[str, Any]:
    request = MemoryFactRequest(user_id=me, agent_name=agent_name, fact_id=fact_id)
    return await _change(gw, "delete_fact", request)


@router.post("/memory/import", responses=errors(422, 503))
async def import_memory(
    gw: GW, me: Me, body: dict[str, Any], agent_name: str | None = None
) -> dict[str, Any]:
    """Replace the caller's memory with an exported document (duplicate facts merged)."""
    request = MemoryImportRequest(user_id=me, agent_name=agent_name, document=body)
    return await _change(gw, "import", request)


class MemoryConfigAnswer(BaseModel):
    enabled: bool
    mode: Literal["middleware"] = "middleware"
    injection_enabled: bool
    debounce_seconds: float
    model_name: str | None
    max_facts: int
    fact_confidence_threshold: float
    max_injection_tokens: int


def _config(gw: GW) -> MemoryConfigAnswer:
    return MemoryConfigAnswer(**answers.memory_config(gw.config))


@router.get("/memory/config")
async def memory_config(gw: GW, me: Me) -> MemoryConfigAnswer:
    return _config(gw)


@router.get("/memory/status")
async def memory_status(gw: GW, me: Me, agent_name: str | None = None) -> dict[str, Any]:
    return {"config": _config(gw).model_dump(), "data": await _read(gw, me, agent_name)}
