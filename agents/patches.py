"""Adjustments to libraries the runner uses, applied once per runner process."""

from __future__ import annotations

from typing import Any


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
