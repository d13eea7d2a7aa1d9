"""Follow-up suggestions: a model writes the questions the user might ask next in a thread.

Served by the threads service (`<prefix>.threads.suggestions`) on the runner side, so the
gateway calls no model itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from bus.content import text_of
from config import AppConfig
from llm.guard import ModelCalls
from llm.models import create_chat_model

log = logging.getLogger(__name__)

PROMPT = (
    "Suggest {n} short follow-up questions the user might ask next, in the user's language. "
    'Answer with a JSON array of strings only, e.g. ["...", "..."].\n\nConversation:\n{conversation}'
)
# The gateway waits 60 s for the reply; a model still thinking by then is given up here first.
MODEL_TIMEOUT_SECONDS = 45.0
_LAST_TURNS = 8
_TURN_CHARS = 2000


class SuggestionFailed(Exception):
    """The model could not be created or did not answer usably."""


def turns_of(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    """A thread's human and AI messages as the {role, content} turns a request would carry."""
    return [{"role": m.type, "content": m.content} for m in messages if m.type in ("human", "ai")]


def conversation_text(turns: list[dict[str, Any]]) -> str:
    """The last turns, one `role: text` line each, long ones cut."""
    return "\n".join(
        f"{t.get('role')}: {text_of(t.get('content'))[:_TURN_CHARS]}" for t in turns[-_LAST_TURNS:]
    )


def parse_suggestions(text: str, n: int) -> list[str]:
    """The model's JSON array (fenced or not), or failing that its non-empty lines without bullets."""
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    match = re.search(r"\[.*\]", text, re.DOTALL)
    if match:
        try:
            items = json.loads(match.group(0))
            return [str(i).strip() for i in items if str(i).strip()][:n]
        except json.JSONDecodeError:
            pass
    lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line).strip() for line in text.splitlines()]
    return [line for line in lines if line][:n]


async def suggest(
    config: AppConfig, turns: list[dict[str, Any]], n: int, model_name: str | None = None
) -> list[str]:
    """Up to `n` follow-up questions for the conversation in `turns` (none for an empty one).

    Raises:
        SuggestionFailed: the model could not be created, failed or took too long.
    """
    conversation = conversation_text(turns)
    if not conversation:
        return []
    try:
        model = create_chat_model(config, model_name)
        async with asyncio.timeout(MODEL_TIMEOUT_SECONDS):
            asked = [HumanMessage(PROMPT.format(n=n, conversation=conversation))]
            # Tried again on a rate limit or an outage (within the time limit); no cluster budget here.
            answer = await ModelCalls(None, config).call(model_name, lambda: model.ainvoke(asked))
    except Exception as exc:
        log.warning("suggestions failed: %s: %s", type(exc).__name__, exc)
        raise SuggestionFailed(f"the model could not suggest follow-ups ({type(exc).__name__})") from exc
    return parse_suggestions(text_of(answer.content), n)
