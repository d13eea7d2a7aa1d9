"""LoopDetectionMiddleware: keep the tool loop sane.

It acts on the model's response inside the model call, so they add no graph
nodes and the stored message is already the corrected one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall

from agents.graph.middleware._util import last_ai, replace_ai, without_tool_calls

log = logging.getLogger(__name__)


def _signature(call: ToolCall) -> str:
    return call["name"] + ":" + json.dumps(call.get("args", {}), sort_keys=True, default=str)


class LoopDetectionMiddleware(AgentMiddleware):
    """Stop a model that keeps making the very same tool call, and make it answer instead."""

    STOP = (
        "You have made the same tool call {count} times with the same arguments and it is not getting "
        "you further. Do not call any more tools. Answer the user now with what you have, "
        "and say what is missing."
    )

    def __init__(self, max_repeats: int = 3) -> None:
        super().__init__()
        self.max_repeats = max_repeats

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        result = await handler(request)
        ai = last_ai(result)
        if ai is None or not ai.tool_calls:
            return result
        seen: dict[str, int] = {}
        for message in request.messages:
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    key = _signature(call)
                    seen[key] = seen.get(key, 0) + 1
        worst = max(seen.get(_signature(c), 0) for c in ai.tool_calls)
        if worst < self.max_repeats:
            return result
        log.warning("tool-call loop detected (%d repeats); forcing a final answer", worst + 1)
        nudge = HumanMessage(self.STOP.format(count=worst + 1))
        forced = await handler(
            request.override(tools=[], tool_choice=None, messages=[*request.messages, nudge])
        )
        final = last_ai(forced)
        text = final.content if final is not None else "I stopped because I was repeating the same step."
        return replace_ai(result, without_tool_calls(ai, content=text))  # type: ignore[arg-type]  # a text answer
