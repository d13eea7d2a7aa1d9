"""Message content as plain text: the one helper every component uses for it.

LangChain and the LangGraph API carry a message's content as a string or as a
list of content blocks (`{"type": "text", "text": ...}`, images, tool use, ...).
"""

from __future__ import annotations

from typing import Any


def text_of(content: Any, sep: str = "\n") -> str:
    """The text of message content; text blocks joined by `sep`, other blocks left out.

    Streamed deltas are pieces of one text: join them with `sep=""`.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in ("text", None) and "text" in block:
                parts.append(str(block["text"]))
        return sep.join(p for p in parts if p)
    return "" if content is None else str(content)
