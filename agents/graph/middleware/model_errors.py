"""LLMErrorHandlingMiddleware: model calls that recover, and an error that reads well when they cannot.

Each model call goes through `llm.guard.ModelCalls`: its model's cluster budget
(`models[].max_concurrent_calls`, per-minute limits), and further tries on a rate limit
(429, with the provider's `Retry-After`), a 5xx, a timeout or a dropped connection. Each wait
is a `custom` run event (`{"type": "llm_retry", "attempt": 2, "max_attempts": 5, ...}`), so a
client can show "retrying (2/5)…".

A model that still cannot be reached raises `ModelUnavailable`, whose message says which model
(by the name the user picked it by: its display name, else its configured name), how often it
was tried and why, so the run ends with status `error` and an `error` event a chat can show as
is; it is never passed off as the model's answer. Mistakes of setup — a wrong key, an unknown
model, a request the provider refuses — are raised unchanged at once, so the error names what
to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langgraph.errors import GraphBubbleUp

from agents.errors import ModelUnavailable
from agents.graph.middleware._util import last_ai
from llm.errors import ModelCallFailed
from llm.guard import ModelCalls
from llm.retry import RetryNotice

log = logging.getLogger(__name__)


def _is_setup_error(exc: Exception) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    return isinstance(
        exc,
        openai.AuthenticationError
        | openai.PermissionDeniedError
        | openai.NotFoundError
        | openai.BadRequestError,
    )


def _model_name(request: ModelRequest[Any]) -> str:
    model = request.model
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "the model")


def _tokens(result: Any) -> int:
    answer = last_ai(result)
    usage = answer.usage_metadata if answer is not None else None
    return int(cast(dict[str, Any], usage or {}).get("total_tokens", 0))


def run_event_writer(request: ModelRequest[Any]) -> Callable[[dict[str, Any]], None] | None:
    """The run's `custom` stream (None outside a graph run, or when nobody listens)."""
    runtime = getattr(request, "runtime", None)
    return getattr(runtime, "stream_writer", None)


class LLMErrorHandlingMiddleware(AgentMiddleware):
    def __init__(
        self,
        model_label: str | None = None,
        calls: ModelCalls | None = None,
        model_name: str | None = None,
    ) -> None:
        """`model_label`: the model as users know it (its display name), named in notices and errors;
        `calls`: the process's model calls (budget and retries; without them, one try);
        `model_name`: the configured model whose budget applies."""
        super().__init__()
        self.model_label = model_label
        self.calls = calls
        self.model_name = model_name

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        label = self.model_label or _model_name(request)
        writer = run_event_writer(request)

        def tell(notice: RetryNotice) -> None:
            if writer is not None:
                writer(notice.event())

        try:
            if self.calls is None:
                return await handler(request)
            return await self.calls.call(
                self.model_name, lambda: handler(request), on_retry=tell, label=label, tokens=_tokens
            )
        except GraphBubbleUp:
            raise
        except ModelCallFailed as exc:
            raise ModelUnavailable(label, exc.cause, exc.attempts) from exc.cause
        except Exception as exc:
            if _is_setup_error(exc) or isinstance(exc, ModelUnavailable):
                raise
            log.warning("model call failed: %s: %s", type(exc).__name__, exc)
            raise ModelUnavailable(label, exc) from exc
