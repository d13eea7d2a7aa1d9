"""The LangGraph-compatible assistants API: search, get, count, versions, and an assistant's graph as
LangGraph's server shows it (`GET /assistants/{id}/graph`, `/schemas`, `/subgraphs`).

The assistants are the lead agent (`lead_agent`, or its LangGraph UUID) and, as in DeerFlow, each of
the caller's custom agents by name, an assistant of the `lead_agent` graph: a run naming one runs the
lead agent with its `agent_name`.

The graph is compiled in the runners (`agents.graph.lead`), and the gateway loads no LangChain:
the threads service describes the graph the runs use (`agents.threads.graph_shape`), as it checks
runs against it, compiled with the custom agent's name when the assistant is one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, Field, StrictInt, field_validator

from bus.agent_store import AgentNameInvalid, AgentStore, valid_name
from bus.messages import AgentDefinition, AssistantGraphReply, AssistantGraphRequest, is_known_assistant
from gateway.deps import GW, Gateway, Me
from gateway.schemas import ASSISTANT_ID, Assistant, Body, errors

router = APIRouter()

GRAPH_SECONDS = 15.0  # compiling the agent and drawing it is milliseconds; a runner may be busy


def assistant_record(assistant_id: str = ASSISTANT_ID) -> Assistant:
    created = "2026-01-01T00:00:00+00:00"
    return Assistant(
        assistant_id=assistant_id,
        graph_id=ASSISTANT_ID,
        name=assistant_id,
        description="Antler's lead agent: sandbox, skills, memory, subagents and tools",
        metadata={"created_by": "system"},
        version=1,
        created_at=created,
        updated_at=created,
    )


def custom_assistant(agent: AgentDefinition) -> Assistant:
    """A custom agent as an assistant of the `lead_agent` graph, as DeerFlow lists them; runs naming
    it run the lead agent with its `agent_name` (`gateway.langgraph_runs.start_run`)."""
    return Assistant(
        assistant_id=agent.name,
        graph_id=ASSISTANT_ID,
        name=agent.name,
        description=agent.description,
        metadata={"created_by": "user"},
        version=1,
        created_at=agent.created_at.isoformat(),
        updated_at=agent.updated_at.isoformat(),
    )


async def custom_agent(gw: Gateway, me: str, assistant_id: str) -> AgentDefinition | None:
    """The caller's custom agent an assistant id names, if any."""
    try:
        name = valid_name(assistant_id)
    except AgentNameInvalid:
        return None
    return await (await AgentStore.open(gw.bus)).get(me, name)


async def find_assistant(gw: Gateway, me: str, assistant_id: str) -> tuple[Assistant, str | None]:
    """The assistant an id names and its custom agent's name (None: the lead agent); 404 for neither."""
    if is_known_assistant(assistant_id):
        return assistant_record(assistant_id), None
    agent = await custom_agent(gw, me, assistant_id)
    if agent is None:
        raise HTTPException(404, f"assistant {assistant_id} not found")
    return custom_assistant(agent), agent.name


class AssistantFilter(Body):
    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None


class AssistantSearch(AssistantFilter):
    limit: StrictInt = Field(10, ge=1, le=1000)
    offset: StrictInt = Field(0, ge=0)


async def _matching(gw: Gateway, me: str, body: AssistantFilter) -> list[Assistant]:
    """The lead agent, then the caller's custom agents by name, as the filter keeps them."""
    agents = sorted(await (await AgentStore.open(gw.bus)).list(me), key=lambda agent: agent.name)
    return [
        shown
        for shown in (assistant_record(), *(custom_assistant(agent) for agent in agents))
        if body.graph_id in (None, shown.graph_id)
        and (not body.name or body.name.lower() in shown.name.lower())
        and not (body.metadata and any(shown.metadata.get(k) != v for k, v in body.metadata.items()))
    ]


@router.post("/assistants/search", responses=errors(413))
async def search_assistants(gw: GW, me: Me, body: AssistantSearch) -> list[Assistant]:
    return (await _matching(gw, me, body))[body.offset : body.offset + body.limit]


@router.post("/assistants/count", responses=errors(413))
async def count_assistants(gw: GW, me: Me, body: AssistantFilter) -> int:
    return len(await _matching(gw, me, body))


@router.get("/assistants/{assistant_id}", responses=errors(404))
async def get_assistant(gw: GW, me: Me, assistant_id: str) -> Assistant:
    return (await find_assistant(gw, me, assistant_id))[0]


class DrawableGraph(BaseModel):
    """LangGraph's drawable graph (`Graph.to_json()`)."""

    nodes: list[dict[str, Any]] = Field(description="`{id, type, data, metadata?}` per node")
    edges: list[dict[str, Any]] = Field(description="`{source, target, conditional?, data?}` per edge")


class GraphSchemas(BaseModel):
    graph_id: str = ASSISTANT_ID
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    state_schema: dict[str, Any] | None = None
    config_schema: dict[str, Any] | None = None
    context_schema: dict[str, Any] | None = None


async def describe(gw: Gateway, me: str, assistant_id: str, **asked: Any) -> dict[str, Any]:
    _, agent = await find_assistant(gw, me, assistant_id)
    request = AssistantGraphRequest(user_id=me, agent_name=agent, **asked)
    reply = await gw.ask("assistant_graph", request, AssistantGraphReply, timeout=GRAPH_SECONDS)
    return reply.answer  # type: ignore[no-any-return]  # the reply model's dict


def xray_depth(
    xray: Annotated[
        str | None,
        Query(
            description="`true` or `false`, or how many levels of subgraphs to draw (1-999)",
            json_schema_extra={"pattern": r"^(true|True|false|False|[1-9][0-9]{0,2})$"},
        ),
    ] = None,
) -> bool | int:
    if xray is None or xray in ("false", "False"):
        return False
    if xray in ("true", "True"):
        return True
    if xray.isdigit() and 0 < int(xray) < 1000:
        return int(xray)
    raise HTTPException(422, "xray: true, false or a number of levels from 1 to 999")


XrayDepth = Annotated[bool | int, Depends(xray_depth)]


@router.get("/assistants/{assistant_id}/graph", responses=errors(404, 503))
async def assistant_graph(gw: GW, me: Me, assistant_id: str, xray: XrayDepth) -> DrawableGraph:
    """The graph runs of this assistant get, drawn: its nodes (the agent's middleware hooks among
    them) and edges; with `xray`, subgraphs' nodes too."""
    return DrawableGraph(**await describe(gw, me, assistant_id, part="graph", xray=xray))


@router.get("/assistants/{assistant_id}/schemas", responses=errors(404, 503))
async def assistant_schemas(gw: GW, me: Me, assistant_id: str) -> GraphSchemas:
    """JSON schemas of the graph's input, output, state, `config.configurable` and `context`."""
    return GraphSchemas(**await describe(gw, me, assistant_id, part="schemas"))


@router.get("/assistants/{assistant_id}/subgraphs", responses=errors(404, 503))
@router.get("/assistants/{assistant_id}/subgraphs/{namespace}", responses=errors(404, 503))
async def assistant_subgraphs(
    gw: GW, me: Me, assistant_id: str, namespace: str | None = None, recurse: bool = False
) -> dict[str, GraphSchemas]:
    """Each subgraph's schemas by namespace: `{}`, the lead agent has none (subagents run apart)."""
    found = await describe(gw, me, assistant_id, part="subgraphs", namespace=namespace, recurse=recurse)
    return {ns: GraphSchemas(**schemas) for ns, schemas in found.items()}


class AssistantVersion(BaseModel):
    assistant_id: str
    graph_id: str
    config: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int
    name: str
    description: str | None = None
    created_at: str


class VersionSearch(Body):
    metadata: dict[str, Any] | None = None
    limit: StrictInt = Field(10, ge=1, le=1000)
    offset: StrictInt = Field(0, ge=0)


@router.post("/assistants/{assistant_id}/versions", responses=errors(404, 413))
async def assistant_versions(
    gw: GW, me: Me, assistant_id: str, body: VersionSearch
) -> list[AssistantVersion]:
    """Its one version: Antler's assistants are configured in config.yaml or are custom agents, not
    versioned through this API."""
    shown, _ = await find_assistant(gw, me, assistant_id)
    if body.metadata and any(shown.metadata.get(k) != v for k, v in body.metadata.items()):
        return []
    version = AssistantVersion(**shown.model_dump(exclude={"updated_at"}))
    return [version][body.offset : body.offset + body.limit]


class LatestVersion(Body):
    version: int = Field(ge=1)

    @field_validator("version", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON's true is no version number
            raise ValueError("Input should be a valid integer")
        return value


@router.post("/assistants/{assistant_id}/latest", responses=errors(404, 413))
async def set_latest_version(gw: GW, me: Me, assistant_id: str, body: LatestVersion) -> Assistant:
    """Version 1 is the latest already; there is no other."""
    shown, _ = await find_assistant(gw, me, assistant_id)
    if body.version != shown.version:
        raise HTTPException(404, f"version: assistant {assistant_id} has only version {shown.version}")
    return shown
