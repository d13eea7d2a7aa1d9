"""Tool approvals answered the way DeerFlow's unmodified web UI answers its question cards, against
the real gateway and runner: the bodies below are what its frontend sends (recorded from it in
Chromium, `tests/webui/test_deerflow_ui_approval.py`), as Next.js passes them on to `/api`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, echo_and_answer, two_calls_then_answer

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("bash_needs_approval")]

STREAM_MODES = ["messages-tuple", "values", "updates", "custom"]


def first_turn(thread: str, text: str) -> dict[str, Any]:
    """DeerFlow's UI sending a new chat's first message."""
    return {
        "input": {
            "messages": [
                {"type": "human", "content": [{"type": "text", "text": text}], "additional_kwargs": {}}
            ]
        },
        "config": {"recursion_limit": 1000},
        "context": {
            "thinking_enabled": True,
            "is_plan_mode": False,
            "subagent_enabled": False,
            "thread_id": thread,
        },
        "stream_mode": STREAM_MODES,
        "assistant_id": "lead_agent",
        "on_disconnect": "continue",
    }


def card_answer(
    thread: str,
    head: dict[str, Any],
    card: dict[str, Any],
    option: str | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """DeerFlow's UI answering the card: an option's button, or a text typed into the card (and the
    thread's newest checkpoint, which its SDK sends with every run)."""
    request = card["artifact"]["human_input"]
    response: dict[str, Any] = {
        "version": 1,
        "kind": "human_input_response",
        "source": request["source"],
        "request_id": request["request_id"],
    }
    if option is not None:
        response |= {"response_kind": "option", "option_id": option, "value": option}
    else:
        response |= {"response_kind": "text", "value": text}
    said = f'For your clarification "{request["question"]}", my answer is: {response["value"]}'
    return {
        "input": {
            "messages": [
                {
                    "type": "human",
                    "content": [{"type": "text", "text": said}],
                    "additional_kwargs": {"hide_from_ui": True, "human_input_response": response},
                }
            ]
        },
        "config": {"recursion_limit": 1000},
        "context": {
            "mode": "flash",
            "thinking_enabled": False,
            "is_plan_mode": False,
            "subagent_enabled": False,
            "thread_id": thread,
        },
        "stream_mode": STREAM_MODES,
        "assistant_id": "lead_agent",
        "checkpoint": {"checkpoint_ns": "", "checkpoint_id": head["checkpoint"]["checkpoint_id"]},
        "on_disconnect": "continue",
    }


async def run_to_end(http: httpx.AsyncClient, thread: str, body: dict[str, Any]) -> httpx.Response:
    """POST the run as DeerFlow's UI streams it; the response once its stream has ended."""
    async with http.stream("POST", f"/threads/{thread}/runs/stream", json=body) as response:
        await response.aread()
    return response


async def waiting_card(http: httpx.AsyncClient, text: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A new chat whose first message made the agent ask; (thread, newest checkpoint, the card message)
    as DeerFlow's UI reads them after the run's stream ended (history, limit 1)."""
    thread = (await http.post("/threads", json={"metadata": {}})).json()["thread_id"]
    assert (await run_to_end(http, thread, first_turn(thread, text))).status_code == 200
    [head] = (await http.post(f"/threads/{thread}/history", json={"limit": 1})).json()
    return thread, head, head["values"]["messages"][-1]


def model_read(model: FakeOpenAI) -> str:
    """Everything the agent's model was sent, as one text."""
    return json.dumps(model.agent_requests)


async def test_a_waiting_approval_is_a_question_card_in_the_newest_state_only(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*echo_and_answer("card-shown", "Done.", when="SHOW-CARD"))
    thread, head, card = await waiting_card(http, "SHOW-CARD: run it")
    call = head["values"]["messages"][-2]["tool_calls"][0]
    [waiting] = head["interrupts"]
    assert card["type"] == "tool"
    assert card["name"] == "ask_clarification"  # the tool message DeerFlow's UI draws as a card
    assert card["tool_call_id"] == call["id"]  # in place of the waiting call's result
    request = card["artifact"]["human_input"]
    assert request["kind"] == "human_input_request"
    assert request["version"] == 1
    assert request["source"] == "tool_approval"
    assert request["request_id"] == waiting["value"]["approval_id"]
    assert request["title"] == "Approval needed: bash"
    assert "echo card-shown" in request["question"]
    assert request["input_mode"] == "choice_with_other"
    assert [o["label"] for o in request["options"]] == ["Approve", "Always for this thread", "Deny"]
    state = (await http.get(f"/threads/{thread}/state")).json()
    assert state["values"]["messages"][-1] == card
    older = (await http.post(f"/threads/{thread}/history", json={"limit": 2})).json()[1]
    assert all(m["type"] != "tool" for m in older["values"]["messages"])  # only what waits now has one


@pytest.mark.parametrize(
    ("option", "always"), [("approve", False), ("always", True)], ids=["approve", "always"]
)
async def test_the_cards_approve_runs_the_call_and_the_card_goes(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, option: str, always: bool
) -> None:
    fake_model.script(*echo_and_answer("approved-by-card", "It printed approved-by-card.", when="APPROVE"))
    thread, head, card = await waiting_card(http, "APPROVE: run it")
    answered = await run_to_end(http, thread, card_answer(thread, head, card, option=option))
    assert answered.status_code == 200, answered.text

    state = (await http.get(f"/threads/{thread}/state")).json()
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]  # no hidden answer, no card
    assert messages[-1]["content"] == "It printed approved-by-card."
    assert "approved-by-card" in messages[2]["content"]
    assert messages[2]["name"] == "bash"
    assert messages[2]["tool_call_id"] == card["tool_call_id"]
    assert not state["interrupts"]
    assert ("bash" in (state["values"].get("approved_tools") or [])) is always
    read = model_read(fake_model)
    assert "The agent wants to use bash" not in read  # the card is never the model's
    assert "For your clarification" not in read


async def test_a_reason_typed_on_the_card_denies_the_call_and_the_model_reads_it(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf /mnt/user-data/outputs"})], when="DENY"),
        Reply(text="Understood, I left the outputs alone.", when="denied"),
    )
    thread, head, card = await waiting_card(http, "DENY: clean up")
    answered = await run_to_end(http, thread, card_answer(thread, head, card, text="not on a Friday"))
    assert answered.status_code == 200, answered.text
    [result] = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "tool"]
    assert "this call was not run: the user denied this call: not on a Friday." in result
    state = (await http.get(f"/threads/{thread}/state")).json()
    assert state["values"]["messages"][-1]["content"] == "Understood, I left the outputs alone."


async def test_another_users_answer_is_refused_and_the_call_still_waits(
    http: httpx.AsyncClient, bob: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*echo_and_answer("not-bobs", "Done.", when="ANAS"))
    thread, head, card = await waiting_card(http, "ANAS: run it")
    refused = await run_to_end(bob, thread, card_answer(thread, head, card, option="approve"))
    assert refused.status_code == 404
    state = (await http.get(f"/threads/{thread}/state")).json()
    assert [i["value"]["approval_id"] for i in state["interrupts"]] == [
        card["artifact"]["human_input"]["request_id"]
    ]
    assert all("not-bobs" not in str(m["content"]) for m in state["values"]["messages"][:-1])  # nothing ran


async def test_a_card_is_answered_once_however_often_it_is_clicked(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*echo_and_answer("clicked-twice", "Ran once.", when="TWICE"))
    thread, head, card = await waiting_card(http, "TWICE: run it")
    body = card_answer(thread, head, card, option="approve")
    clicks = await asyncio.gather(*(run_to_end(http, thread, body) for _ in range(2)))
    clicks.append(await run_to_end(http, thread, body))  # and once more, after it ran
    # A click while the answer's run is pending follows that run (its stream, the same run id); a
    # later one is refused, naming the request.
    followed = {r.headers["content-location"] for r in clicks if r.status_code == 200}
    assert len(followed) == 1
    refused = [r for r in clicks if r.status_code != 200]
    assert refused
    for response in refused:
        assert response.status_code in (409, 422)
        assert "human_input_response.request_id" in response.json()["detail"]
    messages = (await http.get(f"/threads/{thread}/state")).json()["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]


async def test_two_calls_made_side_by_side_show_two_cards_answered_one_at_a_time(
    http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*two_calls_then_answer("BOTH", "One ran, one was refused.", after="one is enough"))
    thread, head, _ = await waiting_card(http, "BOTH: run them")
    left, right = head["values"]["messages"][-2:]
    assert "echo left-call" in left["artifact"]["human_input"]["question"]
    assert "echo right-call" in right["artifact"]["human_input"]["question"]

    assert (
        await run_to_end(http, thread, card_answer(thread, head, left, option="approve"))
    ).status_code == 200
    [head] = (await http.post(f"/threads/{thread}/history", json={"limit": 1})).json()
    messages = head["values"]["messages"]
    assert "left-call" in messages[-2]["content"]  # the left call ran; the right still asks
    assert messages[-1]["artifact"]["human_input"] == right["artifact"]["human_input"]

    denied = await run_to_end(http, thread, card_answer(thread, head, right, text="one is enough"))
    assert denied.status_code == 200, denied.text
    results = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 2
    assert "left-call" in results[0]
    assert "the user denied this call: one is enough" in results[1]
    state = (await http.get(f"/threads/{thread}/state")).json()
    assert state["values"]["messages"][-1]["content"] == "One ran, one was refused."


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            {"option_id": "maybe", "value": "maybe"}, "human_input_response.option_id", id="unknown-option"
        ),
        pytest.param({"response_kind": "form"}, "human_input_response.response_kind", id="unknown-kind"),
        pytest.param(
            {"request_id": "ap-nothing-waits"}, "human_input_response.request_id", id="nothing-waits"
        ),
    ],
)
async def test_an_answer_that_fits_no_waiting_card_is_refused_naming_the_field(
    http: httpx.AsyncClient, fake_model: FakeOpenAI, change: dict[str, Any], field: str
) -> None:
    fake_model.script(*echo_and_answer("bad-answer", "Done.", when="BAD"))
    thread, head, card = await waiting_card(http, "BAD: run it")
    body = card_answer(thread, head, card, option="approve")
    body["input"]["messages"][0]["additional_kwargs"]["human_input_response"] |= change
    refused = await run_to_end(http, thread, body)
    assert refused.status_code == 422
    assert f"input.messages.0.additional_kwargs.{field}" in refused.json()["detail"]
    assert (await http.get(f"/threads/{thread}/state")).json()["interrupts"]  # still waits
