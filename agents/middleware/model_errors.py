"""LLMErrorHandlingMiddleware: a model that cannot be reached ends the run as an error that reads well.

Rate limits, timeouts, 5xx and dropped connections (after the client's own
retries) raise `ModelUnavailable`, whose message says which model could not be
reached and why (by the name the user picked it by: its display name, else its
configured name; the provider's model id only when neither is known), so the
run ends with status `error` and an `error` event a chat can show as is; it is
never passed off as the model's answer. Mistakes of setup — a wrong key, an
unknown model, a request the provider refuses — are raised unchanged, so the
error names what to fix.
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
    def __init__(self, model_label: str | None = None) -> None:
        """`model_label`: the model as users know it (its display name), named in the error."""
        super().__init__()
        self.model_label = model_label

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
            raise ModelUnavailable(self.model_label or _model_name(request), exc) from exc
