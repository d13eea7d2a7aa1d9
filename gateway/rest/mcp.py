"""MCP servers: `/api/mcp/config` (admin-only changes, published to every process) and their status."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config import extensions_path, read_raw_extensions, write_extensions_config
from gateway import extensions
from gateway.deps import GW, Me
from gateway.rest.redact import redact, redact_text
from gateway.schemas import errors

router = APIRouter()


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcp_servers: dict[str, dict[str, Any]]


class McpConfigAnswer(McpConfig):
    status: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per server, per runner or executor process: {ok, error, tools}.",
    )


async def publish_extensions(gw: GW, raw: dict[str, Any]) -> None:
    """Every runner and executor follows this KV key: they load the change before their next run."""
    await extensions.publish(gw.bus, raw)


async def mcp_status(gw: GW) -> dict[str, dict[str, Any]]:
    """Per server, how it started in each process that reported (runners, subagent executors)."""
    return await extensions.mcp_status(gw.bus)


_saving = asyncio.Lock()  # one read-modify-write of extensions_config.json at a time


def _redacted_status(status: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Start reports as a non-admin sees them: an error quoting a command line or URL is redacted."""
    return {
        server: {
            process: {**state, "error": redact_text(state["error"])}
            if isinstance(state, dict) and isinstance(state.get("error"), str)
            else state
            for process, state in where.items()
        }
        for server, where in status.items()
    }


def _admin(gw: GW, me: str) -> None:
    if not gw.auth.is_admin(me):
        raise HTTPException(403, "only an admin token (gateway.tokens[].admin) may change MCP servers")


@router.get("/mcp/config", response_model=McpConfigAnswer)
async def get_mcp(gw: GW, me: Me) -> McpConfigAnswer:
    raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
    servers = raw.get("mcpServers", {})
    status = await mcp_status(gw)
    if not gw.auth.is_admin(me):
        servers, status = redact(servers), _redacted_status(status)
    return McpConfigAnswer(mcp_servers=servers, status=status)


async def _save_mcp(gw: GW, servers: dict[str, dict[str, Any]]) -> McpConfigAnswer:
    path = extensions_path()
    raw = await asyncio.to_thread(read_raw_extensions, path)
    raw["mcpServers"] = servers
    try:
        await asyncio.to_thread(write_extensions_config, raw, path)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HTTPException(422, f"invalid MCP config at {where}: {first['msg']}") from None
    await publish_extensions(gw, raw)
    return McpConfigAnswer(mcp_servers=servers, status=await mcp_status(gw))


@router.put("/mcp/config", response_model=McpConfigAnswer, responses=errors(403, 413))
async def put_mcp(gw: GW, me: Me, body: McpConfig) -> McpConfigAnswer:
    """Replace the MCP servers (admins only); every runner and executor loads them at once."""
    _admin(gw, me)
    async with _saving:
        return await _save_mcp(gw, body.mcp_servers)


class McpPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcp_servers: dict[str, dict[str, Any] | None]


@router.patch("/mcp/config", response_model=McpConfigAnswer, responses=errors(403, 413))
async def patch_mcp(gw: GW, me: Me, body: McpPatch) -> McpConfigAnswer:
    """Change some servers (admins only): each one named replaces its settings (null removes it)."""
    _admin(gw, me)
    async with _saving:
        raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
        servers = dict(raw.get("mcpServers", {}))
        for name, settings in body.mcp_servers.items():
            if settings is None:
                servers.pop(name, None)
            else:
                servers[name] = settings
        return await _save_mcp(gw, servers)
