"""FinishReasonMiddleware: an answer the model left empty, cut short or had filtered, told plainly.

- **empty** (no text, no tool call): asked once more with a nudge; still empty, the answer
  becomes a message saying so.
- **`length`** (the output limit): the text so far is kept with a note that it was cut; tool
  calls cut in the middle are dropped (their arguments are incomplete), and said so.
- **content filter / safety** (`content_filter`, Gemini's `SAFETY`, Anthropic's `refusal`, ...):
  the text so far, if any, with a note that the provider withheld the rest; tool calls dropped.

Each case is a `custom` run event (`{"type": "model_finish", "reason": ..., "message": ...}`).
A rewritten answer gets a new message id, so LangGraph's message stream emits it whole once the
model step ends and chats show it in place of the streamed text (the newest message wins).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage

from agents.graph.middleware._util import last_ai, replace_ai
from agents.graph.middleware.model_errors import run_event_writer
from bus.content import text_of

log = logging.getLogger(__name__)

LENGTH = frozenset({"length", "max_tokens", "MAX_TOKENS", "model_length"})
SAFETY = frozenset(
    {
        "content_filter",
        "safety",
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "refusal",
        "sensitive",
    }
)

NUDGE = (
    "Your last reply was empty. Answer the user now, in words they can read, using what the "
    "conversation already holds."
)
EMPTY_TEXT = (
    "The model gave an empty answer, also when asked again. Please try again, rephrase the "
    "request, or choose another model."
)
LENGTH_NOTE = "(The answer was cut off here: it reached the model's output limit. Ask me to continue.)"
LENGTH_TEXT = (
    "The model reached its output limit before its answer was complete, so nothing usable came "
    "back (a step it was preparing was not taken). Ask for less at once, or raise the model's max_tokens."
)
SAFETY_NOTE = "(The rest of this answer was withheld by the model provider's content filter.)"
SAFETY_TEXT = (
    "The model provider's content filter blocked this answer. Try rephrasing the request, or "
    "choose another model."
)


def finish_reason(message: AIMessage) -> str | None:
    meta = message.response_metadata or {}
    for key in ("finish_reason", "stop_reason"):
        value = meta.get(key)
        if value:
            return str(getattr(value, "name", value))
    return None


def _visible(message: AIMessage) -> str:
    return text_of(message.content, sep="").strip()


class FinishReasonMiddleware(AgentMiddleware):
    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        result = await handler(request)
        ai = last_ai(result)
        if ai is None:
            return result
        reason = finish_reason(ai)
        if reason in SAFETY:
            return self._rewrite(request, result, ai, "content_filter", SAFETY_NOTE, SAFETY_TEXT)
        if reason in LENGTH:
            return self._rewrite(request, result, ai, "length", LENGTH_NOTE, LENGTH_TEXT)
        if _visible(ai) or ai.tool_calls or ai.invalid_tool_calls:
            return result
        log.info("the model answered with nothing; asking once more")
        self._tell(request, "empty", "the model answered with nothing; asking again")
        again = await handler(request.override(messages=[*request.messages, HumanMessage(NUDGE)]))
        second = last_ai(again)
        if second is None or _visible(second) or second.tool_calls or second.invalid_tool_calls:
            return again
        self._tell(request, "empty", EMPTY_TEXT)
        return replace_ai(again, _rewritten(second, EMPTY_TEXT))

    def _rewrite(
        self, request: ModelRequest[Any], result: Any, ai: AIMessage, kind: str, note: str, alone: str
    ) -> Any:
        text = _visible(ai)
        content = f"{text}\n\n{note}" if text else alone
        log.warning("model finished with %s; the answer tells the user", kind)
        self._tell(request, kind, content if not text else note)
        return replace_ai(result, _rewritten(ai, content))

    @staticmethod
    def _tell(request: ModelRequest[Any], reason: str, message: str) -> None:
        writer = run_event_writer(request)
        if writer is not None:
            try:
                writer({"type": "model_finish", "reason": reason, "message": message})
            except Exception as exc:  # a notice must never cost the answer
                log.warning("could not report a model finish: %s", exc)


def _rewritten(message: AIMessage, content: str) -> AIMessage:
    """The answer as the user should see it, without tool calls, under a new id (so it is streamed whole)."""
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in ("tool_calls", "function_call")}
    return AIMessage(
        content=content,
        id=f"finish-{uuid.uuid4().hex}",
        additional_kwargs=extra,
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
        tool_calls=[],
        invalid_tool_calls=[],
    )
