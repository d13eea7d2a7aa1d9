"""Reading a run's events as a client would."""

from __future__ import annotations

from bus.messages import RunEvent


def streamed_text(events: list[RunEvent], message_id: str | None = None) -> str:
    text = ""
    for e in events:
        if e.event == "messages":
            chunk = e.data[0]
            if chunk["type"] == "AIMessageChunk" and (message_id is None or chunk["id"] == message_id):
                text += chunk["content"] if isinstance(chunk["content"], str) else ""
    return text
