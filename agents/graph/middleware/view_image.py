"""ViewImageMiddleware: images the agent looked at (view_image) are shown to a vision model.

They go into the model request as one user message of image blocks, right after
the tool results that loaded them, and are cleared from the state once seen,
so the history does not carry them (or their tokens) forward.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import HumanMessage

from agents.graph.middleware._util import with_update
from agents.graph.state import ThreadState


class ViewImageMiddleware(AgentMiddleware[ThreadState, Any]):
    state_schema = ThreadState

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        images = cast(dict[str, Any], request.state.get("viewed_images") or {})
        if not images:
            return await handler(request)
        blocks: list[str | dict[str, Any]] = [
            {"type": "text", "text": "Here are the images you asked to view:"}
        ]
        for path, image in images.items():
            blocks.append({"type": "text", "text": path})
            blocks.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{image['mime_type']};base64,{image['base64']}"},
                }
            )
        result = await handler(request.override(messages=[*request.messages, HumanMessage(content=blocks)]))
        return with_update(result, {"viewed_images": {}})
