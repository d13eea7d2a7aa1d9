"""`GET/PUT /api/user-profile`: who the caller is, their role and what it lets them use, and (DeerFlow's
field) `content`, their own words about themselves.

The role is resolved as the runner resolves it (`role_for` here): an account's team
role, else one an admin or the identity provider assigned to the user id, else admin for admin tokens
and the single-user mode, else `access.default_role`.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from access import permissions_for
from access.roles import profile_text, set_profile_text
from gateway.auth import Caller
from gateway.deps import GW, CallerOf, Gateway

router = APIRouter()
MAX_PROFILE = 20_000


class UserProfile(BaseModel):
    content: str | None = Field(None, description="The person's own description (DeerFlow's USER.md).")
    id: str
    email: str | None = None
    via: str
    role: str
    admin: bool
    models: list[str]
    tools: list[str]
    skills: list[str]
    agents: list[str]
    available_models: list[str] = Field(description="The configured models this role may use.")


class ProfileUpdate(BaseModel):
    content: str = Field("", max_length=MAX_PROFILE)


async def role_for(gw: Gateway, caller: Caller) -> str | None:
    if caller.account is not None and caller.account.role:
        return caller.account.role
    assigned = await gw.roles.role_of(caller.user_id)
    if assigned:
        return assigned
    if caller.admin:
        return "admin"
    return None


async def _profile(gw: Gateway, caller: Caller) -> UserProfile:
    permissions = permissions_for(gw.config, await role_for(gw, caller))
    summary = permissions.summary()
    return UserProfile(
        content=await profile_text(gw.roles, caller.user_id),
        id=caller.user_id,
        email=caller.account.email if caller.account else None,
        via=caller.via,
        available_models=[m.name for m in gw.config.models if permissions.model(m.name)],
        **summary,
    )


@router.get("/user-profile", response_model=UserProfile)
async def get_profile(gw: GW, caller: CallerOf) -> UserProfile:
    return await _profile(gw, caller)


@router.put("/user-profile", response_model=UserProfile)
async def put_profile(gw: GW, caller: CallerOf, body: ProfileUpdate) -> UserProfile:
    await set_profile_text(gw.roles, caller.user_id, body.content.strip())
    return await _profile(gw, caller)
