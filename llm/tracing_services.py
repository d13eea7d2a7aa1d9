"""LangSmith and Langfuse, for operators who already trace their LLM apps there.

Switched on as DeerFlow does, by environment (`LANGSMITH_TRACING=true` with `LANGSMITH_API_KEY`;
`LANGFUSE_TRACING=true` with `LANGFUSE_PUBLIC_KEY` and `LANGFUSE_SECRET_KEY`), or by config
(`observability.langsmith` / `observability.langfuse`: true or false wins over the environment;
the keys stay in the environment). Each agent run (lead and subagents) then carries the service's
LangChain callback at its graph's root, so one run is one trace holding every model call, tool
call and middleware step; its metadata names the thread, the user, the run and the agent, so both
services group a conversation's runs and show whose they were: LangSmith's threads view reads
`thread_id` from the metadata, Langfuse its reserved `langfuse_session_id`, `langfuse_user_id`,
`langfuse_trace_name` and `langfuse_tags`. A subagent's run names its parent's thread.

Off, nothing is made and nothing is imported: a run's config is left as it was. On, the service's
library is imported and its client made at the first run, in a thread (they are heavy), and kept
for the process: each client sends from a background thread, so a slow, failing or unreachable
service never holds a run up; what it cannot send is logged by the library and dropped.

A service switched on without its keys is reported once, at the first run, and left off (LangSmith
then off for LangChain too, which would otherwise trace on `LANGSMITH_TRACING` by itself and fail
on every call): a run never fails because tracing is misconfigured.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from bus import tracing
from config import AppConfig

log = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")
_LANGSMITH_SWITCHES = (
    "LANGSMITH_TRACING",
    "LANGSMITH_TRACING_V2",
    "LANGCHAIN_TRACING_V2",
    "LANGCHAIN_TRACING",
)


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _flag(*names: str) -> bool:
    return (_env(*names) or "").lower() in _TRUE


def enabled_services(config: AppConfig) -> list[str]:
    """The services switched on (by config, else by environment) whose keys are there."""
    wanted = config.observability
    found = []
    langsmith = wanted.langsmith if wanted.langsmith is not None else _flag(*_LANGSMITH_SWITCHES)
    if langsmith:
        if _env("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
            found.append("langsmith")
        else:
            _warn_once("langsmith", "LangSmith tracing is on but LANGSMITH_API_KEY is not set: not tracing")
    langfuse = wanted.langfuse if wanted.langfuse is not None else _flag("LANGFUSE_TRACING")
    if langfuse:
        missing = [n for n in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY") if not _env(n)]
        if missing:
            _warn_once("langfuse", f"Langfuse tracing is on but {' and '.join(missing)} not set: not tracing")
        else:
            found.append("langfuse")
    return found


_warned: set[str] = set()
_callbacks: dict[str, Any] = {}  # service -> its callback handler, made once per process
_failed: set[str] = set()  # services whose handler could not be made: not tried again
_making = threading.Lock()  # two first runs at once make one handler, not two
_langsmith_silenced = False


def _warn_once(service: str, message: str) -> None:
    if service not in _warned:
        _warned.add(service)
        log.error(message)


def _make(service: str) -> Any:
    """The service's handler, made the first time (imports and a client: call it in a thread)."""
    with _making:
        if service not in _callbacks:
            if service == "langsmith":
                from langchain_core.tracers.langchain import LangChainTracer

                project = _env("LANGSMITH_PROJECT", "LANGCHAIN_PROJECT") or "antler"
                _callbacks[service] = LangChainTracer(project_name=project)
            else:
                from llm.langfuse_handler import langfuse_handler

                _callbacks[service] = langfuse_handler(
                    public_key=_env("LANGFUSE_PUBLIC_KEY") or "",
                    secret_key=_env("LANGFUSE_SECRET_KEY") or "",
                    base_url=_env("LANGFUSE_BASE_URL", "LANGFUSE_HOST") or "https://cloud.langfuse.com",
                )
            log.info("%s tracing on: every agent run is sent there", service)
        return _callbacks[service]


def _silence_langsmith() -> None:
    """LangChain traces to LangSmith on LANGSMITH_TRACING by itself: off for the whole process when
    Antler says off (the config, or a missing key)."""
    import langsmith

    langsmith.configure(enabled=False)
    log.info("LangSmith tracing off for this process, though LANGSMITH_TRACING asks for it")


async def run_callbacks(config: AppConfig) -> list[Any]:
    """The callbacks an agent run carries (none, and nothing imported, unless a service is on)."""
    global _langsmith_silenced
    services = enabled_services(config)
    if "langsmith" not in services and not _langsmith_silenced and _flag(*_LANGSMITH_SWITCHES):
        _langsmith_silenced = True
        await asyncio.to_thread(_silence_langsmith)
    callbacks = []
    for service in services:
        handler = _callbacks.get(service)
        if handler is None and service not in _failed:
            try:
                handler = await asyncio.to_thread(_make, service)
            except Exception as exc:  # a library missing or refusing its settings: say so once
                _failed.add(service)
                _warn_once(service, f"{service} tracing could not start: {type(exc).__name__}: {exc}")
        if handler is not None:
            callbacks.append(handler)
    return callbacks


def trace_metadata(
    services: list[str], *, thread_id: str, user_id: str, run_id: str, agent: str, model: str | None
) -> dict[str, Any]:
    """What a run's RunnableConfig metadata adds for `services` (empty when none is on)."""
    if not services:
        return {}
    found: dict[str, Any] = {"thread_id": thread_id, "user_id": user_id, "run_id": run_id, "agent": agent}
    trace_id = tracing.current_trace_id()  # the OpenTelemetry trace across the bus, when that is on too
    if trace_id:
        found["antler_trace_id"] = trace_id
    if "langfuse" in services:
        found |= {
            "langfuse_session_id": thread_id,
            "langfuse_user_id": user_id,
            "langfuse_trace_name": agent,
            "langfuse_tags": _tags(agent, model),
        }
    return found


def _tags(agent: str, model: str | None) -> list[str]:
    return [f"agent:{agent}", *([f"model:{model}"] if model else [])]


async def with_tracing(
    graph: dict[str, Any],
    config: AppConfig,
    *,
    thread_id: str,
    user_id: str,
    run_id: str,
    agent: str,
    model: str | None,
) -> dict[str, Any]:
    """`graph` (a RunnableConfig, changed in place) with the services' callbacks, tags and metadata,
    if any service is on. The caller's metadata wins over what is added here."""
    callbacks = await run_callbacks(config)
    if not callbacks:
        return graph
    services = [s for s in ("langsmith", "langfuse") if _callbacks.get(s) in callbacks]
    graph["callbacks"] = [*(graph.get("callbacks") or []), *callbacks]
    graph["tags"] = [*(graph.get("tags") or []), *_tags(agent, model)]
    added = trace_metadata(
        services, thread_id=thread_id, user_id=user_id, run_id=run_id, agent=agent, model=model
    )
    graph["metadata"] = {**added, **(graph.get("metadata") or {})}
    return graph
