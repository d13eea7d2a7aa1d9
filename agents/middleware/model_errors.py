"""LLMErrorHandlingMiddleware: a model that cannot be reached ends the run as an error that reads well.

Rate limits, timeouts, 5xx and dropped connections (after the client's own
retries) raise `ModelUnavailable`, whose message says which model could not be
reached and why, so the run ends with status `error` and an `error` event a
chat can show as is; it is never passed off as the model's answer. Mistakes of
setup — a wrong key, an unknown model, a request the provider refuses — are
raised unchanged, so the error names what to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langgraph.errors import GraphBubbleUp

from agents.errors import ModelUnavailable

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


class LLMErrorHandlingMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            if _is_setup_error(exc) or isinstance(exc, ModelUnavailable):
                raise
            log.warning("model call failed: %s: %s", type(exc).__name__, exc)
            raise ModelUnavailable(_model_name(request), exc) from exc
