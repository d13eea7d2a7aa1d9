"""TitleMiddleware: name the thread after its first complete exchange.

Runs inside the model call (no extra graph node): when the model gives a final
answer and the thread has no title yet, a short title is generated and stored
with the same state update. The title call is tagged `nostream`, so its tokens
never appear in the run's message stream, and it is not streamed at all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langgraph.constants import TAG_NOSTREAM

from agents.graph.middleware._util import last_ai, with_update
from agents.graph.state import ThreadState
from bus.content import text_of
from config import TitleConfig

log = logging.getLogger(__name__)

PROMPT = (
    "Write a title for this conversation in at most {max_words} words, in the user's language. "
    "Reply with the title only, no quotes.\n\nUser: {user_msg}\n\nAssistant: {assistant_msg}"
)


def clean_title(raw: str, config: TitleConfig) -> str:
    title = raw.strip().splitlines()[0] if raw.strip() else ""
    title = title.strip().strip("\"'`*#").strip()
    words = title.split()
    title = " ".join(words[: config.max_words])
    if len(title) > config.max_chars:
        title = title[: config.max_chars - 1].rstrip() + "…"
    return title


def fallback_title(user_msg: str, config: TitleConfig) -> str:
    return clean_title(user_msg or "New conversation", config) or "New conversation"


class TitleMiddleware(AgentMiddleware[ThreadState, Any]):
    state_schema = ThreadState

    def __init__(self, config: TitleConfig, title_model: BaseChatModel | None = None) -> None:
        super().__init__()
        self.config = config
        self.title_model = title_model
        self._copies: dict[int, tuple[Any, Any]] = {}  # id(model) -> (model, its non-streaming copy)

    def _unstreamed(self, model: Any) -> Any:
        """The model asked for its whole answer at once: the title is never shown as it streams
        (`nostream`), but inside a run LangGraph's stream handler would still have the model stream
        it, chunk by chunk through the callbacks. A copy per model (an agent has one or two)."""
        if not isinstance(model, BaseChatModel) or model.disable_streaming is True:
            return model
        found = self._copies.get(id(model))
        if found is None or found[0] is not model:
            found = (model, model.model_copy(update={"disable_streaming": True}))
            self._copies[id(model)] = found
        return found[1]

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> Any:
        result = await handler(request)
        if request.state.get("title"):
            return result
        answer = last_ai(result)
        if answer is None or answer.tool_calls:
            return result
        user_msg = next((text_of(m.content) for m in request.messages if isinstance(m, HumanMessage)), "")
        title = await self.generate(request.model, user_msg, text_of(answer.content))
        return with_update(result, {"title": title})

    async def generate(self, run_model: BaseChatModel, user_msg: str, assistant_msg: str) -> str:
        prompt = (self.config.prompt_template or PROMPT).format(
            max_words=self.config.max_words, user_msg=user_msg[:1000], assistant_msg=assistant_msg[:1000]
        )
        model = self._unstreamed(self.title_model or run_model)
        try:
            reply = await model.ainvoke([HumanMessage(prompt)], config={"tags": [TAG_NOSTREAM]})
            title = clean_title(text_of(reply.content), self.config)
        except Exception as exc:  # a title is nice to have; never fail a run over it
            log.warning("title generation failed: %s", exc)
            title = ""
        return title or fallback_title(user_msg, self.config)
