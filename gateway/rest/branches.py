"""Branch a conversation: a new thread of the same user holding the history up to a chosen answer.

DeerFlow's `POST /api/threads/{id}/branches` shape. The new thread's record names its origin in
its metadata (`deerflow_branch`, `branch_parent_thread_id`, `branch_parent_checkpoint_id`,
`branch_parent_message_id`), so thread search and get show where it came from. Its state is the
source's state at the end of the chosen turn, written as one state update through the runners'
threads service (they own checkpoints); the sandbox binding and thread data are the new thread's
own. The source thread's files are not copied (its workspace holds later turns' files too).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from bus.messages import (
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
    utcnow,
)
from gateway.deps import GW, Me
from gateway.rest.replay import checkpoint_before, is_answer, is_user, latest_state
from gateway.schemas import Body, errors

router = APIRouter()

BRANCH_KEY = "deerflow_branch"
NOT_COPIED = frozenset({"sandbox", "thread_data"})  # bound to the source thread's id


class BranchRequest(Body):
    message_id: str = Field(..., min_length=1, description="The assistant message to branch after.")
    message_ids: list[str] = Field(default_factory=list, description="All assistant messages of that turn.")
    title: str | None = Field(None, max_length=256)


class BranchResponse(BaseModel):
    thread_id: str
    parent_thread_id: str
    parent_checkpoint_id: str
    branched_from_message_id: str
    workspace_clone_mode: str = Field(description="`not_copied`: the source's files stay with it.")
    history_seed_mode: str = Field(description="`seeded`: the history up to the turn is the new thread's.")


@router.post("/threads/{thread_id}/branches", response_model=BranchResponse, responses=errors(404, 409))
async def branch_thread(gw: GW, me: Me, thread_id: str, body: BranchRequest) -> BranchResponse:
    """A new thread with this one's history up to the end of the turn holding `message_id`."""
    source = await gw.own_thread(thread_id, me)
    state, messages = await latest_state(gw, thread_id, me)
    wanted = {body.message_id, *body.message_ids}
    index = max((i for i, m in enumerate(messages) if m.get("id") in wanted), default=None)
    if index is None:
        raise HTTPException(404, f"message {body.message_id} not found")
    if not is_answer(messages[index]):
        raise HTTPException(409, "a conversation branches after an assistant's answer")
    end = next((i for i in range(index + 1, len(messages)) if is_user(messages[i])), len(messages))
    snapshot = state if end == len(messages) else await checkpoint_before(gw, thread_id, me, messages[:end])
    parent_checkpoint_id = str(snapshot.checkpoint.get("checkpoint_id") or "")
    values: dict[str, Any] = {k: v for k, v in snapshot.values.items() if k not in NOT_COPIED}
    base_title = body.title or f"{source.title or snapshot.values.get('title') or 'Conversation'} (branch)"
    values["title"] = base_title
    new_id = str(uuid.uuid4())
    metadata = {
        **{k: v for k, v in source.metadata.items() if not k.startswith("branch_") and k != BRANCH_KEY},
        BRANCH_KEY: True,
        "branch_parent_thread_id": thread_id,
        "branch_parent_checkpoint_id": parent_checkpoint_id,
        "branch_parent_message_id": body.message_id,
        "branch_created_at": utcnow().isoformat(),
    }
    created = await gw.ask(
        "create", ThreadCreateRequest(thread_id=new_id, user_id=me, metadata=metadata), ThreadCreateReply
    )
    if created.thread is None or not created.created:
        raise HTTPException(409, "the branch's thread could not be created; try again")
    update = ThreadUpdateStateRequest(thread_id=new_id, user_id=me, values=values, as_node="model")
    await gw.ask("update_state", update, ThreadUpdateStateReply)
    record = await gw.threads.get(new_id)
    gw.view.put(record or created.thread)
    return BranchResponse(
        thread_id=new_id,
        parent_thread_id=thread_id,
        parent_checkpoint_id=parent_checkpoint_id,
        branched_from_message_id=body.message_id,
        workspace_clone_mode="not_copied",
        history_seed_mode="seeded",
    )
