"""DeerFlow features Antler does not have, answered as "none" or "off" rather than 404.

DeerFlow's web UI asks about IM channel connections, the Lark integration, MCP background
tasks and input polish (browser control is served: gateway/rest/browser.py). Reads answer with an
empty list or a disabled flag, so the UI shows its empty state; actions answer
501 saying the feature is not part of Antler (input polish answers with the
text unchanged, which is what "off" means for it). Chat platforms are
configured in config.yaml (`channels`), not from the UI.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel

from gateway.deps import GW, Me
from gateway.schemas import Body, errors

router = APIRouter()


def not_in_antler(feature: str) -> HTTPException:
    return HTTPException(501, f"{feature} is a DeerFlow feature Antler does not have")


NOT_HERE: dict[int | str, dict[str, Any]] = {501: {"description": "A DeerFlow feature Antler does not have"}}


# ------------------------------------------------------------------ channels and integrations


class ChannelProviders(BaseModel):
    enabled: bool
    providers: list[dict[str, Any]]


class ChannelConnections(BaseModel):
    connections: list[dict[str, Any]]


@router.get("/channels/providers", response_model=ChannelProviders)
async def channel_providers(me: Me) -> ChannelProviders:
    """Off: Antler's chat platforms are set up in config.yaml (`channels`)."""
    return ChannelProviders(enabled=False, providers=[])


@router.get("/channels/connections", response_model=ChannelConnections)
async def channel_connections(me: Me) -> ChannelConnections:
    return ChannelConnections(connections=[])


@router.post("/channels/{provider}/connect", responses=NOT_HERE)
async def connect_channel(me: Me, provider: str) -> None:
    raise not_in_antler("connecting chat channels from the UI (Antler's are in config.yaml)")


@router.get("/integrations/lark/status")
async def lark_status(me: Me) -> dict[str, Any]:
    """The Lark integration as not installed."""
    return {
        "installed": False,
        "version": "",
        "manifest_version": None,
        "latest_available_version": None,
        "runtime_version_mismatch": False,
        "app_configured": False,
        "app_id": None,
        "app_brand": None,
        "skills_expected": 0,
        "skills_installed": 0,
        "installed_skills": [],
        "enabled_skills": [],
        "install_path": "",
        "cli": {"available": False, "path": None, "version": None, "error": None},
        "auth": {"status": "unavailable", "message": "not part of Antler", "user": None, "verified": False},
        "sandbox_runtime_mode": "none",
        "sandbox_runtime_ready": False,
        "sandbox_runtime_detail": None,
    }


@router.post("/integrations/lark/install", responses=NOT_HERE)
async def lark_install(me: Me) -> None:
    raise not_in_antler("the Lark integration")


# ------------------------------------------------------------------ per thread


@router.get("/threads/{thread_id}/mcp-tasks", responses=errors(404))
async def mcp_tasks(gw: GW, me: Me, thread_id: str) -> list[dict[str, Any]]:
    """MCP background tasks: none (`/api/features` says `mcp_tasks` is off)."""
    await gw.own_thread(thread_id, me)
    return []


class PolishRequest(Body):
    text: str
    locale: str | None = None
    thread_id: str | None = None


class Polished(BaseModel):
    rewritten_text: str
    changed: bool


@router.post("/input-polish", response_model=Polished)
async def input_polish(me: Me, body: PolishRequest) -> Polished:
    """Off: the text comes back as it was."""
    return Polished(rewritten_text=body.text, changed=False)
