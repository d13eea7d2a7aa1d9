"""LangSmith and Langfuse, for operators who already trace their LLM apps there.

Switched on as DeerFlow does, by environment (`LANGSMITH_TRACING=true` with `LANGSMITH_API_KEY`;
`LANGFUSE_TRACING=true` with `LANGFUSE_PUBLIC_KEY` and `LANGFUSE_SECRET_KEY`), or by config
(`observability.langsmith` / `observability.langfuse`: true or false wins over the environment;
the keys stay in the environment). Each agent run (lead and subagents) then carries the service's
LangChain callback, and its metadata names the thread, the user, the run and the agent, so both
services group a conversation's runs and show whose they were: LangSmith reads `thread_id` from
the metadata, Langfuse its reserved `langfuse_session_id`, `langfuse_user_id`,
`langfuse_trace_name` and `langfuse_tags`.

A service switched on without its keys is reported once, at the first run, and left off: a run
never fails because tracing is misconfigured. Callbacks are made once per process (each holds a
client with a background sender).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from config import AppConfig

log = logging.getLogger(__name__)

_TRUE = ("1", "true", "yes", "on")


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
    langsmith = wanted.langsmith
    if langsmith is None:
        langsmith = _flag("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")
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
_callbacks: dict[str, Any] = {}


def _warn_once(service: str, message: str) -> None:
    if service not in _warned:
        _warned.add(service)
        log.error(message)


def _make(service: str) -> Any:
    if service == "langsmith":
        from langchain_core.tracers.langchain import LangChainTracer

        return LangChainTracer(project_name=_env("LANGSMITH_PROJECT", "LANGCHAIN_PROJECT") or "antler")
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler

    public_key = _env("LANGFUSE_PUBLIC_KEY")
    Langfuse(  # the client the handler reports through (one per process, by its public key)
        public_key=public_key,
        secret_key=_env("LANGFUSE_SECRET_KEY"),
        host=_env("LANGFUSE_BASE_URL", "LANGFUSE_HOST") or "https://cloud.langfuse.com",
    )
    return CallbackHandler(public_key=public_key)


def run_callbacks(config: AppConfig) -> list[Any]:
    """The callbacks an agent run carries (none unless a service is switched on)."""
    callbacks = []
    for service in enabled_services(config):
        if service not in _callbacks:
            try:
                _callbacks[service] = _make(service)
            except Exception as exc:  # a library missing or refusing its settings: say so once
                _warn_once(service, f"{service} tracing could not start: {exc}")
                continue
        callbacks.append(_callbacks[service])
    return callbacks


def trace_metadata(
    config: AppConfig, *, thread_id: str, user_id: str, run_id: str, agent: str, model: str | None
) -> dict[str, Any]:
    """What a run's RunnableConfig metadata adds for the services (empty when none is on)."""
    services = enabled_services(config)
    if not services:
        return {}
    found: dict[str, Any] = {"thread_id": thread_id, "user_id": user_id, "run_id": run_id, "agent": agent}
    if "langfuse" in services:
        found |= {
            "langfuse_session_id": thread_id,
            "langfuse_user_id": user_id,
            "langfuse_trace_name": agent,
            "langfuse_tags": [f"agent:{agent}", *([f"model:{model}"] if model else [])],
        }
    return found


def with_tracing(
    graph: dict[str, Any],
    config: AppConfig,
    *,
    thread_id: str,
    user_id: str,
    run_id: str,
    agent: str,
    model: str | None,
) -> dict[str, Any]:
    """`graph` (a RunnableConfig) with the services' callbacks and metadata, if any is on."""
    callbacks = run_callbacks(config)
    if callbacks:
        graph["callbacks"] = callbacks
        graph["metadata"] = {
            **graph.get("metadata", {}),
            **trace_metadata(
                config, thread_id=thread_id, user_id=user_id, run_id=run_id, agent=agent, model=model
            ),
        }
    return graph
