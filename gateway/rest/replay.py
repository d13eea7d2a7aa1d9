"""Regenerate an answer and edit-and-resend a message, in DeerFlow's request/response shapes.

Neither endpoint starts anything: `prepare` answers with the input, the checkpoint and the
metadata of the run the client then streams itself (`POST /threads/{id}/runs/stream` with
`checkpoint`), which is what DeerFlow's web UI does. The run starts from the checkpoint
before the chosen turn, so LangGraph writes its checkpoints as a fork of that one: the
thread's state becomes the new answer and the old answer's checkpoints stay in the thread's
history as a sibling branch (nothing is deleted).

The checkpoint before a turn is the turn's `input` checkpoint (LangGraph's, tagged with the
run id): its messages are exactly the ones before the turn's user message.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from bus.messages import (
    RunStatus,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadState,
    ThreadStateReply,
    ThreadStateRequest,
)
from gateway.deps import GW, Gateway, Me
from gateway.schemas import Body, errors

router = APIRouter()

# Input checkpoints looked at for the one before a turn (one per run, across branches), and per request.
HISTORY_SCAN = 200
HISTORY_PAGE = 5


class RegeneratePrepareRequest(Body):
    message_id: str = Field(..., min_length=1, description="The assistant message to answer again.")


class RegeneratePrepareResponse(BaseModel):
    input: dict[str, Any]
    checkpoint: dict[str, Any] = Field(description="`checkpoint_ns`, `checkpoint_id`, `checkpoint_map`.")
    metadata: dict[str, Any]
    target_run_id: str = Field(description="The run whose answer the new run replaces.")


class EditRegeneratePrepareRequest(Body):
    human_message_id: str = Field(..., min_length=1, description="The user message to edit and send again.")
    replacement_text: str = Field(..., min_length=1, description="Its new text.")


class EditRegeneratePrepareResponse(RegeneratePrepareResponse):
    replacement_human_message_id: str
    source_message_ids: list[str] = Field(description="The messages of the turn the edit replaces.")


# ------------------------------------------------------------------ messages as the state holds them


def kind(message: dict[str, Any]) -> str:
    return str(message.get("type") or message.get("role") or "")


def hidden(message: dict[str, Any]) -> bool:
    return bool((message.get("additional_kwargs") or {}).get("hide_from_ui"))


def is_user(message: dict[str, Any]) -> bool:
    return kind(message) in ("human", "user") and not hidden(message)


def is_answer(message: dict[str, Any]) -> bool:
    return kind(message) in ("ai", "assistant") and not hidden(message)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content or "")


def ids_of(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("id") or "") for m in messages]


async def latest_state(gw: Gateway, thread_id: str, me: str) -> tuple[ThreadState, list[dict[str, Any]]]:
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    state: ThreadState | None = reply.state
    if state is None or not state.checkpoint.get("checkpoint_id"):
        raise HTTPException(404, f"thread {thread_id} has no checkpoint")
    messages = [m for m in state.values.get("messages") or [] if isinstance(m, dict)]
    return state, messages


async def checkpoint_before(
    gw: Gateway, thread_id: str, me: str, before: list[dict[str, Any]]
) -> ThreadState:
    """The newest `input` checkpoint whose messages are exactly `before`: where the turn after them began.

    Read a few states at a time, newest first (each holds the thread's messages up to then, so a
    long thread's history would not fit one reply); the latest turns are found in the first page.

    Raises:
        HTTPException: 409 when no such checkpoint is in the thread's recent history.
    """
    wanted = ids_of(before)
    cursor: str | None = None
    for _ in range(HISTORY_SCAN // HISTORY_PAGE):
        request = ThreadHistoryRequest(
            thread_id=thread_id,
            user_id=me,
            limit=HISTORY_PAGE,
            before=cursor,
            metadata={"source": "input"},
        )
        reply: ThreadHistoryReply = await gw.ask("history", request, ThreadHistoryReply)
        for state in reply.states:
            messages = [m for m in state.values.get("messages") or [] if isinstance(m, dict)]
            if ids_of(messages) == wanted and state.checkpoint.get("checkpoint_id"):
                return state
        if len(reply.states) < HISTORY_PAGE:
            break
        cursor = str(reply.states[-1].checkpoint.get("checkpoint_id") or "") or None
        if cursor is None:
            break
    raise HTTPException(409, "the checkpoint before this turn is no longer in the thread's history")


async def idle_thread(gw: Gateway, thread_id: str, me: str) -> None:
    """The caller's thread, not answering now: a turn being written cannot be redone (409)."""
    record = await gw.own_thread(thread_id, me)
    if record.status == "busy" and record.active_run_id:
        busy = f"thread {thread_id} is answering (run {record.active_run_id}); wait for it to end"
        raise HTTPException(409, busy)


def checkpoint_answer(state: ThreadState) -> dict[str, Any]:
    return {
        "checkpoint_ns": str(state.checkpoint.get("checkpoint_ns") or ""),
        "checkpoint_id": str(state.checkpoint["checkpoint_id"]),
        "checkpoint_map": None,
    }


def user_turn_start(messages: list[dict[str, Any]], index: int) -> int:
    """The index of the user message that began the turn holding `messages[index]`."""
    start = next((i for i in range(index - 1, -1, -1) if is_user(messages[i])), None)
    if start is None:
        raise HTTPException(409, "could not find the user message this answer replies to")
    return start


def replayed_user_message(message: dict[str, Any]) -> dict[str, Any]:
    """The user's message as it was sent, without what the server added (hidden flags)."""
    kwargs = {k: v for k, v in (message.get("additional_kwargs") or {}).items() if k != "hide_from_ui"}
    replay: dict[str, Any] = {
        "type": "human",
        "content": [{"type": "text", "text": text_of(message)}],
        "additional_kwargs": kwargs,
    }
    if message.get("id"):
        replay["id"] = message["id"]
    if message.get("name"):
        replay["name"] = message["name"]
    return replay


def with_title(graph_input: dict[str, Any], state: ThreadState) -> dict[str, Any]:
    """The thread's current title goes along: the older checkpoint may hold an older one."""
    title = state.values.get("title")
    if isinstance(title, str) and title:
        graph_input["title"] = title
    return graph_input


# ------------------------------------------------------------------ routes


@router.post(
    "/threads/{thread_id}/runs/regenerate/prepare",
    response_model=RegeneratePrepareResponse,
    responses=errors(404, 409),
)
async def prepare_regenerate(
    gw: GW, me: Me, thread_id: str, body: RegeneratePrepareRequest
) -> RegeneratePrepareResponse:
    """What to stream to answer the latest turn again: its user message, from the checkpoint before it."""
    await idle_thread(gw, thread_id, me)
    state, messages = await latest_state(gw, thread_id, me)
    index = next((i for i, m in enumerate(messages) if m.get("id") == body.message_id), None)
    if index is None:
        raise HTTPException(404, f"message {body.message_id} not found")
    if not is_answer(messages[index]):
        raise HTTPException(409, "only an assistant's answer can be regenerated")
    latest = next((m for m in reversed(messages) if is_answer(m)), None)
    if latest is None or latest.get("id") != body.message_id:
        raise HTTPException(409, "only the latest answer can be regenerated")
    start = user_turn_start(messages, index)
    base = await checkpoint_before(gw, thread_id, me, messages[:start])
    target_run_id = str(base.metadata.get("run_id") or "")
    checkpoint = checkpoint_answer(base)
    return RegeneratePrepareResponse(
        input=with_title({"messages": [replayed_user_message(messages[start])]}, state),
        checkpoint=checkpoint,
        metadata={
            "regenerate_from_message_id": body.message_id,
            "regenerate_from_run_id": target_run_id,
            "regenerate_checkpoint_id": checkpoint["checkpoint_id"],
        },
        target_run_id=target_run_id,
    )


@router.post(
    "/threads/{thread_id}/runs/edit-regenerate/prepare",
    response_model=EditRegeneratePrepareResponse,
    responses=errors(404, 409),
)
async def prepare_edit_regenerate(
    gw: GW, me: Me, thread_id: str, body: EditRegeneratePrepareRequest
) -> EditRegeneratePrepareResponse:
    """What to stream to send the latest user message again with new text, in place of the original."""
    await idle_thread(gw, thread_id, me)
    text = body.replacement_text.strip()
    if not text:
        raise HTTPException(409, "the edited message cannot be empty")
    state, messages = await latest_state(gw, thread_id, me)
    start = next((i for i in range(len(messages) - 1, -1, -1) if is_user(messages[i])), None)
    if start is None or messages[start].get("id") != body.human_message_id:
        raise HTTPException(409, "only the latest user message can be edited")
    answers = [i for i in range(start + 1, len(messages)) if is_answer(messages[i])]
    last = answers[-1] if answers else None
    if last is None or not text_of(messages[last]).strip() or messages[last].get("tool_calls"):
        raise HTTPException(409, "only a turn that ended with an answer can be edited")
    source = messages[start]
    if text == text_of(source).strip():
        raise HTTPException(409, "the edited message is unchanged")
    base = await checkpoint_before(gw, thread_id, me, messages[:start])
    target_run_id = str(base.metadata.get("run_id") or "")
    run = await gw.runs.get(target_run_id) if target_run_id else None
    if run is None or run.thread_id != thread_id or run.status != RunStatus.SUCCESS:
        raise HTTPException(409, "only a turn whose run succeeded can be edited and sent again")
    replacement_id = str(uuid.uuid4())
    kept = {k: v for k, v in (source.get("additional_kwargs") or {}).items() if k == "files"}
    replacement: dict[str, Any] = {
        "type": "human",
        "id": replacement_id,
        "content": [{"type": "text", "text": text}],
        "additional_kwargs": kept,
    }
    checkpoint = checkpoint_answer(base)
    source_human_id = str(source.get("id") or "")
    group = run.metadata.get("edit_version_group_id")
    return EditRegeneratePrepareResponse(
        input=with_title({"messages": [replacement]}, state)
        if base.values.get("title")
        else {"messages": [replacement]},
        checkpoint=checkpoint,
        metadata={
            "replay_kind": "edit",
            "regenerate_from_message_id": str(messages[last].get("id") or ""),
            "regenerate_from_run_id": target_run_id,
            "regenerate_checkpoint_id": checkpoint["checkpoint_id"],
            "edit_from_message_id": source_human_id,
            "edit_message_id": replacement_id,
            "edit_version_group_id": group if isinstance(group, str) and group else source_human_id,
        },
        target_run_id=target_run_id,
        replacement_human_message_id=replacement_id,
        source_message_ids=[i for i in ids_of(messages[start : last + 1]) if i],
    )
