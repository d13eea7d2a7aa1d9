"""LangGraph SDK methods Antler does not offer, answered 501 with what to use instead.

Without these routes the SDK's crons, store, assistant editing, thread copy and prune, the thread
stream and the v3 thread-stream protocol got a bare 404 "Not Found" or 405, which reads as a wrong
URL. Each answer names the method, says that Antler does not offer it and points at Antler's own way
to do it (docs/http-api.md, "The LangGraph SDK, method by method", lists them all).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from fastapi import APIRouter, HTTPException

from gateway.deps import Me
from gateway.schemas import errors

router = APIRouter()

DOCS = "docs/http-api.md#the-langgraph-sdk-method-by-method"
NOT_OFFERED = errors(501)


def not_offered(method: str, instead: str) -> HTTPException:
    return HTTPException(501, f"{method} is not offered by Antler's LangGraph API: {instead} (see {DOCS})")


def _refuse(method: str, instead: str, path: str) -> Any:
    async def refuse(me: str, **path_params: str) -> None:
        raise not_offered(method, instead)

    # The path's parameters are declared, so the OpenAPI document states them (they are not read).
    params = [inspect.Parameter("me", inspect.Parameter.KEYWORD_ONLY, annotation=Me)]
    params += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
        for name in re.findall(r"\{(\w+)\}", path)
    ]
    refuse.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]  # read by FastAPI
    refuse.__doc__ = f"Not offered (501): {instead}."
    return refuse


_AGENTS = "Antler's assistant is the lead agent, configured in config.yaml; make your own as a custom agent"

# (HTTP method, path, SDK method, what to use instead)
UNSUPPORTED: tuple[tuple[str, str, str, str], ...] = (
    ("POST", "/assistants", "assistants.create", f"{_AGENTS} with POST /api/agents"),
    (
        "PATCH",
        "/assistants/{assistant_id}",
        "assistants.update",
        f"{_AGENTS} and change it: PUT /api/agents/{{name}}",
    ),
    (
        "DELETE",
        "/assistants/{assistant_id}",
        "assistants.delete",
        f"{_AGENTS}; remove one: DELETE /api/agents/{{name}}",
    ),
    (
        "POST",
        "/threads/{thread_id}/copy",
        "threads.copy",
        "branch the thread with POST /api/threads/{thread_id}/branches",
    ),
    ("POST", "/threads/prune", "threads.prune", "delete each thread with DELETE /api/threads/{thread_id}"),
    (
        "GET",
        "/threads/{thread_id}/stream",
        "threads.join_stream",
        "follow a run: GET /api/threads/{thread_id}/runs/{run_id}/stream (runs.join_stream)",
    ),
    (
        "POST",
        "/threads/{thread_id}/commands",
        "threads.stream (the v3 protocol)",
        "stream a run with runs.stream",
    ),
    (
        "POST",
        "/threads/{thread_id}/stream/events",
        "threads.stream (the v3 protocol)",
        "stream a run with runs.stream",
    ),
    ("POST", "/runs/batch", "runs.create_batch", "create each run with runs.create (POST /api/runs)"),
    *(
        (verb, path, f"crons.{name}", "schedule runs with Antler's scheduled tasks: /api/scheduled-tasks")
        for verb, path, name in (
            ("POST", "/threads/{thread_id}/runs/crons", "create_for_thread"),
            ("POST", "/runs/crons", "create"),
            ("PATCH", "/runs/crons/{cron_id}", "update"),
            ("DELETE", "/runs/crons/{cron_id}", "delete"),
            ("POST", "/runs/crons/search", "search"),
            ("POST", "/runs/crons/count", "count"),
        )
    ),
    *(
        (verb, path, f"store.{name}", "the agent's long-term store is Antler's memory: /api/memory")
        for verb, path, name in (
            ("PUT", "/store/items", "put_item"),
            ("GET", "/store/items", "get_item"),
            ("DELETE", "/store/items", "delete_item"),
            ("POST", "/store/items/search", "search_items"),
            ("POST", "/store/namespaces", "list_namespaces"),
        )
    ),
)

for _verb, _path, _method, _instead in UNSUPPORTED:
    router.add_api_route(
        _path,
        _refuse(_method, _instead, _path),
        methods=[_verb],
        responses=NOT_OFFERED,
        status_code=501,
        summary=f"{_method}: not offered",
        operation_id=re.sub(r"\W+", "_", f"unsupported_{_verb}_{_path}").strip("_").lower(),
    )
