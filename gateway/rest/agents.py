"""DeerFlow's custom agents API, for the caller's own agents: `/api/agents`.

GET /api/agents, POST /api/agents (201), GET /api/agents/check?name=, GET/PUT/DELETE
/api/agents/{name}. Agents live in KV (`bus.agent_store.AgentStore`), so every runner
uses the same definition; a run with `agent_name` set takes its soul, model, tools and skills.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from pydantic import BaseModel, Field, StrictBool

from bus.agent_store import (
    AGENT_NAME,
    AgentExists,
    AgentNameInvalid,
    AgentNotFound,
    AgentStore,
    check_fields,
    valid_name,
)
from bus.messages import AgentDefinition
from gateway.deps import GW, Me
from gateway.schemas import errors

router = APIRouter()

Effort = Literal["minimal", "low", "medium", "high"]


class AgentSettings(BaseModel):
    description: str | None = None
    model: str | None = Field(None, description="A model under `models:`; null = the run's or default.")
    tool_groups: list[str] | None = Field(None, description="Tool groups it may use; null = all.")
    skills: list[str] | None = Field(None, description="Skills listed to it; null = all enabled, [] = none.")
    model_settings: dict[str, Any] | None = None
    thinking_enabled: StrictBool | None = None
    reasoning_effort: Effort | None = None
    soul: str | None = Field(None, description="SOUL.md: its personality and instructions.")


class AgentCreate(AgentSettings):
    name: str = Field(
        description="Letters, digits and '-', at most 64; stored lower-cased.",
        json_schema_extra={"pattern": AGENT_NAME.pattern},
    )
    description: str = ""
    soul: str = ""


class AgentAnswer(BaseModel):
    name: str
    description: str = ""
    model: str | None = None
    tool_groups: list[str] | None = None
    skills: list[str] | None = None
    model_settings: dict[str, Any] | None = None
    thinking_enabled: bool | None = None
    reasoning_effort: Effort | None = None
    soul: str | None = None


class AgentsList(BaseModel):
    agents: list[AgentAnswer]


class NameCheck(BaseModel):
    available: bool
    name: str


def _answer(agent: AgentDefinition) -> AgentAnswer:
    return AgentAnswer.model_validate(agent.model_dump(include=set(AgentAnswer.model_fields)))


async def _store(gw: GW) -> AgentStore:
    return await AgentStore.open(gw.bus)


def _name(name: str) -> str:
    try:
        return valid_name(name)
    except AgentNameInvalid as exc:
        raise HTTPException(422, str(exc)) from None


def _fields(gw: GW, body: BaseModel, *, set_only: bool) -> dict[str, Any]:
    fields = body.model_dump(exclude={"name"}, exclude_unset=set_only)
    try:
        check_fields(fields, [m.name for m in gw.config.models])
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return fields


@router.get("/agents", response_model=AgentsList)
async def list_agents(gw: GW, me: Me) -> AgentsList:
    return AgentsList(agents=[_answer(a) for a in await (await _store(gw)).list(me)])


@router.get("/agents/check", response_model=NameCheck, responses=errors(422))
async def check_name(
    gw: GW, me: Me, name: Annotated[str, Query(json_schema_extra={"pattern": AGENT_NAME.pattern})]
) -> NameCheck:
    normalized = _name(name)
    return NameCheck(available=await (await _store(gw)).get(me, normalized) is None, name=normalized)


@router.post("/agents", response_model=AgentAnswer, status_code=201, responses=errors(409, 422))
async def create_agent(gw: GW, me: Me, body: AgentCreate) -> AgentAnswer:
    name = _name(body.name)
    try:
        return _answer(await (await _store(gw)).create(me, name, _fields(gw, body, set_only=False)))
    except AgentExists as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/agents/{name}", response_model=AgentAnswer, responses=errors(404, 422))
async def get_agent(gw: GW, me: Me, name: str) -> AgentAnswer:
    agent = await (await _store(gw)).get(me, _name(name))
    if agent is None:
        raise HTTPException(404, f"no agent named {name}")
    return _answer(agent)


@router.put("/agents/{name}", response_model=AgentAnswer, responses=errors(404, 422))
async def update_agent(gw: GW, me: Me, name: str, body: AgentSettings) -> AgentAnswer:
    fields = _fields(gw, body, set_only=True)
    for text in ("description", "soul"):  # null for a text: empty (an agent always has one)
        if text in fields and fields[text] is None:
            fields[text] = ""
    try:
        return _answer(await (await _store(gw)).update(me, _name(name), fields))
    except AgentNotFound as exc:
        raise HTTPException(404, str(exc)) from None


@router.delete("/agents/{name}", status_code=204, responses=errors(404, 422))
async def delete_agent(gw: GW, me: Me, name: str) -> Response:
    try:
        await (await _store(gw)).delete(me, _name(name))
    except AgentNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return Response(status_code=204)
