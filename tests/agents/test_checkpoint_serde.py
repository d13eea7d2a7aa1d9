"""Checkpoints written with each message's encoding kept: the same bytes LangGraph writes, and a
message changed after it was read or written is written as it is now."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agents.checkpoint_serde import MessageKeepingSerializer


def thread(turns: int) -> dict[str, Any]:
    messages: list[Any] = []
    for n in range(turns):
        messages.append(HumanMessage(f"question {n}", id=f"h{n}"))
        messages.append(
            AIMessage(
                f"answer {n}",
                id=f"a{n}",
                tool_calls=[{"name": "look", "args": {"n": n}, "id": f"c{n}"}] if n % 3 == 0 else [],
                response_metadata={"model_name": "fake"},
            )
        )
        if n % 3 == 0:
            messages.append(ToolMessage(f"found {n}", tool_call_id=f"c{n}", id=f"t{n}"))
    return {"v": 4, "channel_values": {"messages": messages, "title": "A thread"}}


def test_a_checkpoint_is_written_as_langgraph_writes_it_every_time() -> None:
    plain, keeping = JsonPlusSerializer(), MessageKeepingSerializer()
    checkpoint = thread(20)
    expected = plain.dumps_typed(checkpoint)
    assert keeping.dumps_typed(checkpoint) == expected
    assert keeping.dumps_typed(checkpoint) == expected, "written again from the kept encodings"
    restored = keeping.loads_typed(expected)
    assert restored == checkpoint
    assert keeping.dumps_typed(restored) == expected, "a restored thread is written as it was read"
    assert plain.loads_typed(keeping.dumps_typed(restored)) == checkpoint


def test_a_message_changed_after_it_was_read_or_written_is_written_as_it_is_now() -> None:
    keeping, plain = MessageKeepingSerializer(), JsonPlusSerializer()
    restored = keeping.loads_typed(plain.dumps_typed(thread(4)))
    messages = restored["channel_values"]["messages"]
    unnamed = HumanMessage("no id yet")
    messages.append(unnamed)
    keeping.dumps_typed(restored)  # every message's encoding kept, `unnamed` without an id
    unnamed.id = "given-later"  # as LangGraph's add_messages does to a message without one
    messages[0].content = "question 0, edited"
    messages[1].tool_calls.append({"name": "look", "args": {"n": 99}, "id": "c99", "type": "tool_call"})
    messages[3].additional_kwargs["note"] = "added"
    messages[2].response_metadata = {"model_name": "other"}
    written = plain.loads_typed(keeping.dumps_typed(restored))["channel_values"]["messages"]
    assert written[-1].id == "given-later"
    assert written[0].content == "question 0, edited"
    assert [call["id"] for call in written[1].tool_calls] == ["c0", "c99"]
    assert written[3].additional_kwargs == {"note": "added"}
    assert written[2].response_metadata == {"model_name": "other"}
    assert written == messages
