"""Our middlewares on their own: what the model is sent, and what comes back from it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agents.graph.middleware import DanglingToolCallMiddleware, LoopDetectionMiddleware
from agents.graph.middleware.dangling import PLACEHOLDER
from agents.graph.middleware.title import clean_title
from config import TitleConfig

pytestmark = pytest.mark.asyncio


def request(messages: list[Any]) -> ModelRequest[Any]:
    return ModelRequest(model=GenericFakeChatModel(messages=iter(())), messages=messages, tools=[], state={})


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


async def test_dangling_tool_calls_get_placeholder_results_right_after_their_call() -> None:
    seen: list[Any] = []

    async def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.extend(req.messages)
        return ModelResponse(result=[AIMessage("ok")])

    history = [
        HumanMessage("do two things"),
        AIMessage("", tool_calls=[call("a", "1"), call("b", "2")]),
        ToolMessage("a done", tool_call_id="1"),
        HumanMessage("never mind, stop"),
    ]
    await DanglingToolCallMiddleware().awrap_model_call(request(history), handler)
    kinds = [(type(m).__name__, getattr(m, "tool_call_id", None)) for m in seen]
    assert kinds == [
        ("HumanMessage", None),
        ("AIMessage", None),
        ("ToolMessage", "2"),
        ("ToolMessage", "1"),
        ("HumanMessage", None),
    ]
    assert seen[2].content == PLACEHOLDER


async def test_a_repeated_tool_call_loop_is_broken_with_a_final_answer() -> None:
    same = call("search", "x", q="weather")
    history: list[Any] = [HumanMessage("weather?")]
    for i in range(3):
        history += [
            AIMessage("", tool_calls=[{**same, "id": f"c{i}"}]),
            ToolMessage("no result", tool_call_id=f"c{i}"),
        ]
    sent_tools: list[int] = []

    async def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        sent_tools.append(len(req.tools))
        if len(sent_tools) == 1:
            return ModelResponse(result=[AIMessage("", tool_calls=[{**same, "id": "c9"}], id="m9")])
        return ModelResponse(result=[AIMessage("I could not find the weather.")])

    result = await LoopDetectionMiddleware(max_repeats=3).awrap_model_call(request(history), handler)
    final = result.result[-1]
    assert final.tool_calls == []
    assert final.content == "I could not find the weather."
    assert final.id == "m9", "the stored message keeps its id"
    assert len(sent_tools) == 2


async def test_different_tool_calls_are_not_a_loop() -> None:
    history: list[Any] = [HumanMessage("read files")]
    for i in range(5):
        history += [
            AIMessage("", tool_calls=[call("read", f"c{i}", path=f"f{i}")]),
            ToolMessage("x", tool_call_id=f"c{i}"),
        ]

    async def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        return ModelResponse(result=[AIMessage("", tool_calls=[call("read", "c9", path="f9")])])

    result = await LoopDetectionMiddleware(max_repeats=3).awrap_model_call(request(history), handler)
    assert result.result[-1].tool_calls[0]["args"] == {"path": "f9"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param('"Trip to Lisbon"', "Trip to Lisbon", id="quotes"),
        pytest.param(
            "## Planning a very long trip across the whole of Europe",
            "Planning a very long trip across",
            id="words",
        ),
        pytest.param("Title\nwith a second line", "Title", id="first-line"),
    ],
)
async def test_titles_are_cleaned_and_capped(raw: str, expected: str) -> None:
    assert clean_title(raw, TitleConfig(max_words=6, max_chars=60)) == expected
