"""`GET /api/usage`: the caller's tokens and cost this day and month against their role's budget
(access.usage); admins may ask for anyone's (`?user=<id>`) or everyone's (`?all=true`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from access import permissions_for
from access.usage import UsageBook
from gateway.deps import GW, CallerOf
from gateway.rest.profile import role_for

router = APIRouter()


class Usage(BaseModel):
    user_id: str
    role: str | None = None
    periods: list[dict[str, Any]] = Field(
        description="day and month: tokens, cost, token_limit, cost_limit (null: none), resets_at"
    )


class UsagePage(BaseModel):
    people: list[Usage]


@router.get("/usage", response_model=UsagePage, responses={403: {}})
async def usage(
    gw: GW,
    caller: CallerOf,
    user: Annotated[str | None, Query(max_length=200, description="admins: whose usage")] = None,
    all_people: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
) -> UsagePage:
    book = await UsageBook.open(gw.bus)
    if (user is not None and user != caller.user_id) or all_people:
        if not caller.admin:
            raise HTTPException(403, "user: only admins may see another person's usage")
    if all_people:
        people = await book.everyone()
        return UsagePage(
            people=[
                Usage(user_id=who, periods=[u.as_json() for u in uses])
                for who, uses in sorted(people.items())
            ]
        )
    if user is None or user == caller.user_id:
        who, permissions = caller.user_id, permissions_for(gw.config, await role_for(gw, caller))
    else:  # as the runner resolves it: an assigned role, an admin token, a chat platform's role
        who, permissions = user, await gw.run_access.permissions(user)
    uses = await book.usage(who, permissions.config.budget)
    return UsagePage(people=[Usage(user_id=who, role=permissions.role, periods=[u.as_json() for u in uses])])
