"""Teams' admin and linking routes: `GET /api/v1/audit` (admins: the audit trail, filtered by person,
action and time), `PUT /api/v1/roles/{user_id}` (admins: a person's role, effective at their next
run), and `POST /api/v1/connect` (a signed-in person redeems a chat's `/connect` code: that chat user
becomes them: the chat user's threads are theirs at once, what the agent remembered of the chat user
(its facts) joins their memory, and the chat's runs have their memory, role and budget from its next
message)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from access import AuditRecord
from access.audit import parse_when
from bus.messages import (
    MemoryDocument,
    MemoryFactRequest,
    MemoryReply,
    ThreadPatchReply,
    ThreadPatchRequest,
)
from bus.records import RecordStore
from bus.service import ServiceError, call
from gateway.deps import GW, CallerOf, Gateway

log = logging.getLogger(__name__)
router = APIRouter()


def _admin(caller: CallerOf) -> None:
    if not caller.admin:
        raise HTTPException(403, "only admins may do this")


class AuditPage(BaseModel):
    records: list[AuditRecord]


@router.get("/v1/audit", response_model=AuditPage, responses={403: {}})
async def audit(
    gw: GW,
    caller: CallerOf,
    user: Annotated[str | None, Query(max_length=200, description="about or by whom")] = None,
    action: Annotated[str | None, Query(pattern=r"^[a-z_]{1,40}$")] = None,
    since: Annotated[
        str | None, Query(max_length=40, description="ISO 8601 with a zone, or an age: 90m, 2h, 7d")
    ] = None,
    until: Annotated[str | None, Query(max_length=40, description="as since")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPage:
    _admin(caller)
    try:  # the same filters as `antler audit`
        start = parse_when(since, "since") if since is not None else None
        end = parse_when(until, "until") if until is not None else None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    records = await gw.audit.read(user_id=user, action=action, since=start, until=end, limit=limit)
    return AuditPage(records=records)


class RoleChange(BaseModel):
    role: str = Field(max_length=64)


class RoleAnswer(BaseModel):
    user_id: str
    role: str


@router.put("/v1/roles/{user_id}", response_model=RoleAnswer, responses={403: {}, 422: {}})
async def assign_role(gw: GW, caller: CallerOf, user_id: str, body: RoleChange) -> RoleAnswer:
    _admin(caller)
    roles = gw.config.access.roles
    if body.role not in roles:
        raise HTTPException(422, f"role: no role {body.role!r} (roles: {', '.join(roles)})")
    await gw.roles.assign(user_id, body.role, source=f"admin:{caller.user_id}")
    assert gw.auth.accounts is not None
    for account in await gw.auth.accounts.all():
        if account.user_id == user_id:
            await gw.auth.accounts.set_role(account.email, body.role, admin=roles[body.role].admin)
    await gw.audit.record("role_changed", user_id=user_id, actor=caller.user_id, detail={"role": body.role})
    return RoleAnswer(user_id=user_id, role=body.role)


class ConnectCode(BaseModel):
    code: str = Field(min_length=4, max_length=20)


class Connected(BaseModel):
    chat_user: str
    user_id: str
    threads: list[str] = Field(default_factory=list, description="The chat user's threads, now theirs.")
    facts: int = Field(0, description="Facts the agent remembered of the chat user, added to their memory.")


@router.post("/v1/connect", response_model=Connected, responses={404: {}})
async def connect(gw: GW, caller: CallerOf, body: ConnectCode) -> Connected:
    chat_user = await gw.roles.redeem(body.code)
    if chat_user is None:
        raise HTTPException(404, "code: unknown, already used or expired; send /connect in the chat again")
    await gw.roles.link(chat_user, caller.user_id)
    moved = await _give_threads(gw, chat_user, caller.user_id)
    facts = await _carry_memory(gw, chat_user, caller.user_id)
    detail = {"chat_user": chat_user, "threads": moved, "facts": facts}
    await gw.audit.record("chat_linked", user_id=caller.user_id, detail=detail)
    return Connected(chat_user=chat_user, user_id=caller.user_id, threads=moved, facts=facts)


async def _carry_memory(gw: Gateway, chat_user: str, user_id: str) -> int:
    """The facts the agent learned about the chat user, added to the account's memory (one memory);
    how many. A fact the account's memory has already is left out; without a memory updater none are
    carried (logged: the link holds all the same)."""
    store = RecordStore(await gw.bus.kv(gw.bus.subjects.memory_bucket), MemoryDocument)
    theirs = await store.get(MemoryDocument.key(chat_user, None))
    carried = 0
    for fact in theirs.facts if theirs is not None else []:
        request = MemoryFactRequest(
            user_id=user_id, content=fact.content, category=fact.category, confidence=fact.confidence
        )
        try:
            await call(gw.bus, "memory", "add_fact", request, MemoryReply, timeout=30)
        except ServiceError as exc:
            if exc.code != "conflict":  # conflict: the same fact is there already
                log.warning("memory of %s not carried to %s: %s", chat_user, user_id, exc.message)
                break
        else:
            carried += 1
    return carried


async def _give_threads(gw: Gateway, chat_user: str, user_id: str) -> list[str]:
    """The chat user's threads become the account's (visible in the web UI at once); their ids."""
    theirs = await gw.view.search(
        chat_user, keep=lambda _: True, sort_by="updated_at", descending=True, offset=0, limit=10_000
    )
    moved = []
    for record in theirs:
        request = ThreadPatchRequest(thread_id=record.thread_id, user_id=chat_user, owner=user_id)
        reply = await gw.ask("patch", request, ThreadPatchReply)
        if reply.thread is not None:
            gw.view.put(reply.thread)
            moved.append(record.thread_id)
    return moved
