"""`GET /health`: is the bus reachable, and which components answer `$SRV` discovery (how many of each)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.deps import GW, Gateway
from gateway.rest.mcp import mcp_status

router = APIRouter()


async def discover(gw: Gateway, wait: float = 0.25) -> dict[str, int]:
    """Instances per component, from the `$SRV.PING` answers of our micro services."""
    prefix = gw.bus.subjects.service_name("")
    names = {"threads": "runner", "sandbox": "sandbox", "memory": "memory", "schedules": "scheduler"}
    counts: dict[str, int] = {"gateway": 1}
    inbox = gw.bus.nc.new_inbox()
    replies: list[bytes] = []

    async def collect(msg: Any) -> None:
        replies.append(msg.data)

    sub = await gw.bus.nc.subscribe(inbox, cb=collect)
    try:
        await gw.bus.nc.publish("$SRV.PING", b"", reply=inbox)
        await asyncio.sleep(wait)
    finally:
        await sub.unsubscribe()
    for raw in replies:
        try:
            name = str(json.loads(raw).get("name", ""))
        except ValueError:
            continue
        if name.startswith(prefix):
            component = names.get(name[len(prefix) :], name[len(prefix) :])
            counts[component] = counts.get(component, 0) + 1
    return counts


@router.get(
    "/health",
    responses={503: {"description": "The bus (NATS) is unreachable: nothing can be served."}},
)
async def health(gw: GW) -> JSONResponse:
    """NATS, and which components answer `$SRV` discovery (how many instances of each).

    200 `ok` when the bus and a runner answer, 200 `degraded` when the bus does but no
    runner, 503 `unavailable` when the bus is gone (a load balancer should stop sending).
    """
    connected = gw.bus.nc.is_connected
    components = await discover(gw) if connected else {}
    status = "unavailable" if not connected else "ok" if "runner" in components else "degraded"
    body: dict[str, Any] = {"status": status, "nats": connected, "components": components}
    if connected:  # which MCP servers failed, and in how many processes (details: /api/mcp/config)
        failing = {
            server: sum(1 for state in where.values() if not state.get("ok"))
            for server, where in (await mcp_status(gw)).items()
        }
        body["mcp_failures"] = {server: count for server, count in failing.items() if count}
    return JSONResponse(body, status_code=200 if connected else 503)
