"""Tool approvals in DeerFlow's human-input shapes, so DeerFlow's own web UI answers them.

DeerFlow's UI shows no LangGraph interrupts. It shows a question card for a tool message whose
`artifact.human_input` is a request (what its `ask_clarification` writes), and answers the card
with a new human message, hidden from the chat, whose `additional_kwargs.human_input_response`
names the request. Both directions are translated here, at the LangGraph API:

- `with_approval_cards`: a thread state that waits for approvals (its `interrupts`) shows, after
  its messages, one tool message per request: the waiting call's id, the name DeerFlow's UI draws
  as a card (`ask_clarification`) and a `choice_with_other` request (Approve, Always for this
  thread, Deny; a text typed instead denies with it as the reason). The message is for showing
  only: it is not in the checkpoint, and the model never reads it. The call's real result (or its
  denial) replaces it, under the same tool call id, once the request is answered.
- `approval_answer`: a run whose input is such an answer (`source: "tool_approval"`) becomes the
  resume run that a `command: {"resume": ...}` would be, with the id a chat's answer gets
  (`bus.approvals.answer_run_id`), so the request is answered once. The hidden message does not
  enter the conversation: the call's result (or denial, with the reason) says what the person
  decided, where the model reads it.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import HTTPException

from bus.messages import ThreadState

SOURCE = "tool_approval"  # the request's `source`, and how its answers are told from others
CARD_TOOL_NAME = "ask_clarification"  # the only tool message DeerFlow's UI draws as a question card
APPROVAL = "approval_request"  # the interrupt value's `type` (agents.graph.approvals.APPROVAL)
OPTIONS = (
    {"id": "approve", "label": "Approve", "value": "approve"},
    {"id": "always", "label": "Always for this thread", "value": "always"},
    {"id": "deny", "label": "Deny", "value": "deny"},
)
_DECISIONS = {option["id"]: option["value"] for option in OPTIONS}


def waiting_approvals(state: ThreadState | None) -> list[dict[str, Any]]:
    """The approval requests a thread state waits on (its interrupts' values, each with its
    interrupt's id as `interrupt_id`)."""
    found = []
    for item in state.interrupts if state else []:
        value = item.get("value")
        if isinstance(value, dict) and value.get("type") == APPROVAL and value.get("approval_id"):
            found.append({**value, "interrupt_id": item.get("id")})
    return found


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def human_input_request(approval: dict[str, Any]) -> dict[str, Any]:
    """DeerFlow's human-input request (version 1) for an approval request."""
    tool = str(approval.get("tool") or "a tool")
    args = approval.get("args") if isinstance(approval.get("args"), dict) else {}
    command = args.get("command") if isinstance(args, dict) else None
    if isinstance(command, str):
        question = f"The agent wants to use {tool} to run:\n\n{_fenced(command)}"
    else:
        question = f"The agent wants to call {tool}:\n\n{_fenced(str(approval.get('description') or tool))}"
    request: dict[str, Any] = {
        "version": 1,
        "kind": "human_input_request",
        "source": SOURCE,
        "request_id": str(approval["approval_id"]),
        "title": f"Approval needed: {tool}",
        "question": question,
        "context": (
            f"Approve runs it once; Always lets {tool} run unasked for the rest of this chat. "
            "Deny, or type a reason below, and the agent is told it may not (and why)."
        ),
        "input_mode": "choice_with_other",
        "options": [dict(option) for option in OPTIONS],
    }
    if approval.get("tool_call_id"):
        request["tool_call_id"] = str(approval["tool_call_id"])
    return request


def card_message(approval: dict[str, Any]) -> dict[str, Any]:
    """The display-only tool message that carries the request, as a thread's values hold messages."""
    request = human_input_request(approval)
    text = request["question"] + "\n\n" + "\n".join(f"- {o['label']}" for o in OPTIONS)
    return {
        "type": "tool",
        "id": f"approval-{request['request_id']}",
        "name": CARD_TOOL_NAME,
        "tool_call_id": str(approval.get("tool_call_id") or f"approval-{request['request_id']}"),
        "content": text,
        "artifact": {"human_input": request},
        "status": "success",
        "additional_kwargs": {"approval_id": request["request_id"], "display_only": True},
        "response_metadata": {},
    }


def with_approval_cards(state: ThreadState) -> ThreadState:
    """The state with a card message after its messages for each approval it waits on."""
    waiting = waiting_approvals(state)
    messages = state.values.get("messages")
    if not waiting or not isinstance(messages, list):
        return state
    shown = {m.get("tool_call_id") for m in messages if isinstance(m, dict) and m.get("type") == "tool"}
    cards = [card_message(a) for a in waiting if a.get("tool_call_id") not in shown]
    if not cards:
        return state
    return state.model_copy(update={"values": {**state.values, "messages": [*messages, *cards]}})


def answers_an_approval(run_input: dict[str, Any] | None) -> bool:
    """Whether a run's input is an answer to an approval card (DeerFlow's UI sends it so).

    Raises:
        HTTPException: 422 for an answer that does not come alone.
    """
    return _response_of(run_input) is not None


def _response_of(run_input: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """(field path, the response) of an input that answers an approval; None for any other input."""
    messages = (run_input or {}).get("messages")
    if not isinstance(messages, list):
        return None
    for index, message in enumerate(messages):
        kwargs = message.get("additional_kwargs") if isinstance(message, dict) else None
        response = kwargs.get("human_input_response") if isinstance(kwargs, dict) else None
        if isinstance(response, dict) and response.get("source") == SOURCE:
            where = f"input.messages.{index}.additional_kwargs.human_input_response"
            if len(messages) != 1 or set(run_input or {}) != {"messages"}:
                raise HTTPException(422, f"{where}: an approval's answer comes alone, the run's only input")
            return where, response
    return None


def _decision(where: str, response: dict[str, Any]) -> dict[str, Any]:
    """The resume value for DeerFlow's response (version 1): an option, or a text that denies."""
    if response.get("version") != 1 or response.get("kind") != "human_input_response":
        raise HTTPException(422, f'{where}: expected version 1 and kind "human_input_response"')
    value = response.get("value")
    if not isinstance(value, str) or not value.strip():
        raise HTTPException(422, f"{where}.value: the answer's text is missing")
    kind = response.get("response_kind")
    if kind == "option":
        option = response.get("option_id")
        if option not in _DECISIONS:
            raise HTTPException(
                422, f"{where}.option_id: {option!r} is none of the card's options ({', '.join(_DECISIONS)})"
            )
        return {"decision": _DECISIONS[str(option)]}
    if kind == "text":
        return {"decision": "deny", "reason": value.strip()}
    raise HTTPException(422, f'{where}.response_kind: expected "option" or "text", not {kind!r}')


def approval_answer(
    run_input: dict[str, Any] | None, state: ThreadState | None, thread_id: str, user_id: str
) -> tuple[str, dict[str, Any]] | None:
    """(approval id, resume value) when `run_input` answers one of the thread's waiting approvals;
    None when it is no approval's answer (an ordinary message, a clarification's answer).

    Raises:
        HTTPException: 422 naming the field, for an answer in a shape DeerFlow's UI does not send, or
            one whose `request_id` names no approval the thread waits on (answered already, expired
            and denied, or never asked here).
    """
    found = _response_of(run_input)
    if found is None:
        return None
    where, response = found
    resume = _decision(where, response)
    ident = response.get("request_id")
    waiting = waiting_approvals(state)
    approval = next((a for a in waiting if a["approval_id"] == ident), None)
    if approval is None:
        raise HTTPException(
            422,
            f"{where}.request_id: no approval {ident!r} waits on thread {thread_id} "
            "(it was answered already, or expired and was denied)",
        )
    if time.time() > float(approval.get("expires_at") or float("inf")):
        resume = {"decision": "deny", "expired": True}  # too late: the expiry's denial, as in a chat
    resume = {**resume, "approval_id": ident, "by": user_id}
    if len(waiting) > 1 and approval.get("interrupt_id"):
        # Calls made side by side wait together: LangGraph takes a resume for one of them only
        # addressed to its interrupt (the others ask again when the run goes on).
        return str(ident), {str(approval["interrupt_id"]): resume}
    return str(ident), resume
