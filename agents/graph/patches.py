"""Adjustments to libraries the runner uses, applied once per runner process."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

_middleware_spans: ContextVar[bool] = ContextVar("antler_middleware_spans", default=True)


def inline_trace_bookkeeping() -> None:
    """Keep langsmith's per-hook bookkeeping on the event loop while tracing is off.

    create_agent wraps every middleware hook in langsmith's `traceable`, whose wrapper hands its setup
    and teardown to a thread pool, twice per hook and model call, whether or not anything is traced.
    langsmith's runtime override (made for runtimes without threads) lets that work run inline; with
    tracing on (LANGSMITH_TRACING) the default thread hop is kept.
    """
    import langsmith
    from langsmith.utils import tracing_is_enabled

    async def inline(default: Any, ctx: Any, func: Any, /, *args: Any, **kwargs: Any) -> Any:
        if tracing_is_enabled():
            return await default(ctx, func, *args, **kwargs)
        return ctx.run(func, *args, **kwargs)

    langsmith.set_runtime_overrides(aio_to_thread=inline)


@contextlib.contextmanager
def middleware_spans(enabled: bool) -> Iterator[None]:
    """Agents compiled inside wrap their middleware hooks in LangSmith spans only if `enabled`.

    create_agent wraps every `wrap_model_call`/`wrap_tool_call` hook in langsmith's `traceable`,
    traced or not; unused, each wrapper still sets up and tears down a run context per hook and
    model call (about a twentieth of a chat turn's CPU in the runner with the default middlewares).
    Compiled without LangSmith, the hooks are called as they are: nothing else depends on the
    wrapper, and the agent's own LangChain callbacks (Langfuse's among them) are untouched. The
    choice is made per compile (a context variable: concurrent compiles do not see each other's).
    """
    _switch_traceable()
    token = _middleware_spans.set(enabled)
    try:
        yield
    finally:
        _middleware_spans.reset(token)


def _unwrapped(hook: Callable[..., Any]) -> Callable[..., Any]:
    return hook


def _switch_traceable() -> None:
    """create_agent's `traceable`, made to consult `middleware_spans` (installed once per process)."""
    from langchain.agents import factory

    if getattr(factory.traceable, "antler_switch", False):  # type: ignore[attr-defined]  # create_agent's module imports it; we patch it there
        return
    real = factory.traceable  # type: ignore[attr-defined]  # as above

    def traceable(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs) if _middleware_spans.get() else _unwrapped

    traceable.antler_switch = True  # type: ignore[attr-defined]  # a mark on the function: installed once
    factory.traceable = traceable  # type: ignore[attr-defined]  # as above
