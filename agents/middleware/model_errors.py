"""LLMErrorHandlingMiddleware: a model outage becomes an answer the user can read.

Rate limits, timeouts, 5xx and dropped connections (after the client's own
retries) turn into an assistant message saying the model could not be reached,
so the run ends cleanly and the conversation stays valid. Mistakes of setup —
a wrong key, an unknown model, a request the provider refuses — are raised,
so the run ends with an error event that says what to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp

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


class LLMErrorHandlingMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            if _is_setup_error(exc):
                raise
            log.warning("model call failed: %s: %s", type(exc).__name__, exc)
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return AIMessage(
                content="I could not get an answer from the model just now "
                f"({type(exc).__name__}: {detail}). "
                "Please try again in a moment."
            )
