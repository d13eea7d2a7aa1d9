"""The FastAPI app: the LangGraph-compatible API (at /api and /api/langgraph), health, and the web UI
(at /, a client of the API: `gateway.webui`).

Errors are JSON `{"detail": "..."}`: 4xx for the caller's mistakes, never a stack trace.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse

from gateway.allow import MethodsAsDocumented
from gateway.auth import RequireToken
from gateway.crashes import AnswerCrashes
from gateway.deps import Gateway
from gateway.langgraph_api import router as langgraph_router
from gateway.limits import MB, BodyLimit, BodyLimitMiddleware
from gateway.openapi import document_models
from gateway.rest.accounts import router as accounts_router
from gateway.rest.agents import router as agents_router
from gateway.rest.branches import router as branches_router
from gateway.rest.conversation import router as conversation_router
from gateway.rest.feedback import router as feedback_router
from gateway.rest.files import router as files_router
from gateway.rest.memory import router as memory_router
from gateway.rest.placeholders import router as placeholders_router
from gateway.rest.replay import router as replay_router
from gateway.rest.run_history import router as run_history_router
from gateway.rest.settings import mcp_status
from gateway.rest.settings import router as settings_router
from gateway.rest.skills import MAX_SKILL_ARCHIVE
from gateway.rest.skills import router as skills_router
from gateway.schemas import errors
from gateway.webui import WebUI

log = logging.getLogger(__name__)


async def discover(gw: Gateway, wait: float = 0.25) -> dict[str, int]:
    """Instances per component, from the `$SRV.PING` answers of our micro services."""
    prefix = gw.bus.subjects.service_name("")
    names = {"threads": "runner", "sandbox": "sandbox", "memory": "memory"}
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


MULTIPART_OVERHEAD = 64 * 1024  # part headers and boundaries around the files


def body_limits(gw: Gateway) -> dict[str, Any]:
    """Uploads may carry `gateway.max_upload_mb` (all files together), skill archives their limit, and
    any other body what one message on our NATS server can (it becomes one)."""
    upload_mb = gw.config.gateway.max_upload_mb
    payload = gw.bus.nc.max_payload
    return {
        "limits": [
            BodyLimit(
                "POST",
                re.compile(r"/api/threads/[^/]+/uploads"),
                upload_mb * MB + MULTIPART_OVERHEAD,
                f"an upload may carry at most {upload_mb} MB in all (gateway.max_upload_mb)",
            ),
            BodyLimit(
                "POST",
                re.compile(r"/api/skills/install"),
                MAX_SKILL_ARCHIVE + MULTIPART_OVERHEAD,
                f"a .skill archive may be at most {MAX_SKILL_ARCHIVE // MB} MB",
            ),
        ],
        "default_bytes": payload,
        "default_message": (
            f"a request body may be at most {payload / MB:g} MB (the NATS server's max_payload)"
        ),
    }


def create_app(gw: Gateway) -> FastAPI:
    docs = gw.config.gateway.docs_enabled
    app = FastAPI(
        title="Antler",
        version="0.1.0",
        description="Antler's HTTP gateway: LangGraph-compatible runtime API and REST API",
        docs_url="/docs" if docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.gateway = gw
    app.openapi = document_models(app.openapi, [m.name for m in gw.config.models])  # type: ignore[method-assign]
    # Outermost last: 500s, the web UI's files, CORS (preflights need no token), the token check,
    # body limits.
    app.add_middleware(MethodsAsDocumented)  # innermost: 405 and Allow as the OpenAPI document says
    app.add_middleware(BodyLimitMiddleware, **body_limits(gw))
    app.add_middleware(RequireToken, auth=gw.auth)
    if gw.config.gateway.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=gw.config.gateway.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Content-Location", "Location"],
        )
    app.add_middleware(WebUI)  # answers only GET / and /ui/..., files without data
    app.add_middleware(AnswerCrashes)  # outermost of ours: a 500 that keeps the connection open
    # Any API route may refuse the caller (RequireToken), a body it cannot parse (400) or its shape (422).
    refusals = errors(400, 401, 422)
    app.include_router(langgraph_router, prefix="/api", tags=["langgraph"], responses=refusals)
    app.include_router(langgraph_router, prefix="/api/langgraph", include_in_schema=False, responses=refusals)
    app.include_router(files_router, prefix="/api", tags=["uploads and artifacts"], responses=refusals)
    app.include_router(settings_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    app.include_router(skills_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    app.include_router(memory_router, prefix="/api", tags=["memory"], responses=refusals)
    app.include_router(agents_router, prefix="/api", tags=["custom agents"], responses=refusals)
    app.include_router(conversation_router, prefix="/api", tags=["conversation"], responses=refusals)
    for actions in (replay_router, branches_router, feedback_router, run_history_router):
        app.include_router(actions, prefix="/api", tags=["conversation"], responses=refusals)
    app.include_router(accounts_router, prefix="/api/v1/auth", tags=["sign-in"], responses=refusals)
    # Compatibility answers for DeerFlow features Antler lacks: not part of Antler's documented API.
    app.include_router(placeholders_router, prefix="/api", include_in_schema=False, responses=refusals)

    @app.get(
        "/health",
        tags=["health"],
        responses={503: {"description": "The bus (NATS) is unreachable: nothing can be served."}},
    )
    async def health() -> JSONResponse:
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

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors()[:10]:
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            problems.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
        return JSONResponse({"detail": "; ".join(problems) or "invalid request"}, status_code=422)

    return app
