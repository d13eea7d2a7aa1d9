"""`GET /health`: is the bus reachable, which components answer `$SRV` discovery (how many of each),
and which say they are not well (`bus.health`, heard with every process's metrics)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from bus.health import summarize
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
    """NATS, which components answer `$SRV` discovery (how many instances of each), and which are
    not well: `unhealthy` (cannot do their work now: their platform unreachable, failed and being
    started again) and `degraded` (serving with less than they should), each with the reason.

    200 `ok` when the bus and a runner answer and every component is well; 200 `degraded` when
    the bus answers but no runner does, or a component is not well: this gateway still serves, so
    an orchestrator's probe must not take it out of service or restart it for another component's
    outage (read the body to alert on it); 503 `unavailable` when the bus is gone (a load balancer
    should stop sending).
    """
    connected = gw.bus.nc.is_connected
    components = await discover(gw) if connected else {}
    summaries = summarize(gw.board.live()) if connected and gw.board is not None else {}
    unhealthy = {name: s.text for name, s in summaries.items() if s.status == "unhealthy"}
    degraded = {name: s.text for name, s in summaries.items() if s.status == "degraded"}
    well = "runner" in components and not unhealthy and not degraded
    status = "unavailable" if not connected else "ok" if well else "degraded"
    body: dict[str, Any] = {
        "status": status,
        "nats": connected,
        "components": components,
        "unhealthy": unhealthy,
        "degraded": degraded,
    }
    if connected:  # which MCP servers failed, and in how many processes (details: /api/mcp/config)
        failing = {
            server: sum(1 for state in where.values() if not state.get("ok"))
            for server, where in (await mcp_status(gw)).items()
        }
        body["mcp_failures"] = {server: count for server, count in failing.items() if count}
    return JSONResponse(body, status_code=200 if connected else 503)
