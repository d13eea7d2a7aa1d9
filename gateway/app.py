"""The FastAPI app: the LangGraph-compatible API (at /api and /api/langgraph), health, and the web UI
(at /, a client of the API: `gateway.webui`).

Errors are JSON `{"detail": "..."}`: 4xx for the caller's mistakes, never a stack trace.
"""

from __future__ import annotations

import functools
import logging

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute

from bus import tracing
from gateway.allow import MethodsAsDocumented
from gateway.audit_changes import AuditChanges
from gateway.auth import RequireToken
from gateway.crashes import AnswerCrashes
from gateway.deps import Gateway
from gateway.health import router as health_router
from gateway.langgraph_api import router as langgraph_router
from gateway.limits import BodyLimitMiddleware, body_limits
from gateway.metrics import router as metrics_router
from gateway.openapi import document_models
from gateway.rest.accounts import router as accounts_router
from gateway.rest.agents import router as agents_router
from gateway.rest.branches import router as branches_router
from gateway.rest.browser import router as browser_router
from gateway.rest.commands import router as commands_router
from gateway.rest.compact import router as compact_router
from gateway.rest.conversation import router as conversation_router
from gateway.rest.custom_skills import router as custom_skills_router
from gateway.rest.feedback import router as feedback_router
from gateway.rest.files import router as files_router
from gateway.rest.goal import router as goal_router
from gateway.rest.mcp import router as mcp_router
from gateway.rest.memory import router as memory_router
from gateway.rest.models import router as models_router
from gateway.rest.placeholders import router as placeholders_router
from gateway.rest.profile import router as profile_router
from gateway.rest.replay import router as replay_router
from gateway.rest.run_history import router as run_history_router
from gateway.rest.scheduled_tasks import router as scheduled_tasks_router
from gateway.rest.skills import router as skills_router
from gateway.rest.sso import router as sso_router
from gateway.rest.teams import router as teams_router
from gateway.rest.usage import router as usage_router
from gateway.schemas import errors
from gateway.tracing import TraceRequests
from gateway.webui import WebUI

log = logging.getLogger(__name__)


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
    app.openapi = document_models(app.openapi, [m.name for m in gw.config.models])  # type: ignore[method-assign]  # FastAPI's way to extend the schema
    # Outermost last: 500s, the web UI's files, CORS (preflights need no token), the token check,
    # body limits.
    app.add_middleware(MethodsAsDocumented)  # innermost: 405 and Allow as the OpenAPI document says
    app.add_middleware(AuditChanges, audit=gw.audit)  # MCP servers', skills', schedules' changes
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
    if tracing.ON:  # a caller's traceparent continued, X-Trace-Id answered (gateway.tracing)
        app.add_middleware(TraceRequests)
    app.add_middleware(AnswerCrashes)  # outermost of ours: a 500 that keeps the connection open
    app.router.routes.extend(api_routes())

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


@functools.cache
def api_routes() -> tuple[BaseRoute, ...]:
    """Every route of the gateway, included once per process and shared by the apps made in it.

    FastAPI builds an included route's state (its dependants and pydantic adapters: ~0.3 s of CPU
    for the ~110 routes) at the route's first match and keeps it on the include; apps that include
    the routers each on their own build it all again. One process makes one app under `antler up`,
    but the tests make one per test. Routes included here see no `app.dependency_overrides` (none
    are used)."""
    api = APIRouter()
    # Any API route may refuse the caller (RequireToken), a body it cannot parse (400) or its shape (422).
    refusals = errors(400, 401, 422)
    api.include_router(langgraph_router, prefix="/api", tags=["langgraph"], responses=refusals)
    api.include_router(langgraph_router, prefix="/api/langgraph", include_in_schema=False, responses=refusals)
    api.include_router(files_router, prefix="/api", tags=["uploads and artifacts"], responses=refusals)
    api.include_router(browser_router, prefix="/api", tags=["uploads and artifacts"], responses=refusals)
    api.include_router(models_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    api.include_router(mcp_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    api.include_router(custom_skills_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    api.include_router(skills_router, prefix="/api", tags=["models, MCP, skills"], responses=refusals)
    api.include_router(memory_router, prefix="/api", tags=["memory"], responses=refusals)
    api.include_router(agents_router, prefix="/api", tags=["custom agents"], responses=refusals)
    api.include_router(conversation_router, prefix="/api", tags=["conversation"], responses=refusals)
    api.include_router(goal_router, prefix="/api", tags=["goal mode"], responses=refusals)
    api.include_router(compact_router, prefix="/api", tags=["conversation"], responses=refusals)
    api.include_router(commands_router, prefix="/api", tags=["conversation"], responses=refusals)
    for actions in (replay_router, branches_router, feedback_router, run_history_router):
        api.include_router(actions, prefix="/api", tags=["conversation"], responses=refusals)
    api.include_router(scheduled_tasks_router, prefix="/api", tags=["scheduled tasks"], responses=refusals)
    api.include_router(accounts_router, prefix="/api/v1/auth", tags=["sign-in"], responses=refusals)
    api.include_router(sso_router, prefix="/api/v1/auth", tags=["sign-in"], responses=refusals)
    api.include_router(profile_router, prefix="/api", tags=["teams"], responses=refusals)
    api.include_router(teams_router, prefix="/api", tags=["teams"], responses=refusals)
    api.include_router(usage_router, prefix="/api", tags=["teams"], responses=refusals)
    # Compatibility answers for DeerFlow features Antler lacks: not part of Antler's documented API.
    api.include_router(health_router, tags=["health"])
    api.include_router(metrics_router, tags=["health"], responses=refusals)
    api.include_router(placeholders_router, prefix="/api", include_in_schema=False, responses=refusals)
    return tuple(api.routes)
