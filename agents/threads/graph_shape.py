"""An assistant's compiled graph described as LangGraph's server describes it, for the gateway's
`GET /assistants/{id}/graph`, `/schemas` and `/subgraphs` (the gateway loads no LangChain: it asks
the threads service, which has the graphs the runs use).

The shapes follow `langgraph_api`'s assistants routes: the drawable graph's `to_json()` with each
node's `data.id` (a Python import path) left out; the schemas' `input_schema`, `output_schema`,
`state_schema` (the stream channels' update types), `config_schema` (the `configurable` part only)
and `context_schema`.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import TypeAdapter, create_model

from agents.events import jsonable

log = logging.getLogger(__name__)

_INTERNAL_CONFIG_KEYS = ("__pregel_resuming", "__pregel_checkpoint_id")


def drawable_graph(graph: Any, xray: bool | int) -> dict[str, Any]:
    """`{nodes: [{id, type, data, metadata?}], edges: [{source, target, conditional?, data?}]}`."""
    shape: dict[str, Any] = graph.get_graph(xray=xray).to_json()
    for node in shape.get("nodes", []):
        data = node.get("data")
        if isinstance(data, dict):
            data.pop("id", None)
    return jsonable(shape)  # type: ignore[no-any-return]  # a dict stays a dict


def _state_schema(graph: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key in graph.stream_channels_list:
        kind = graph.channels[key].UpdateType
        try:
            TypeAdapter(kind).json_schema()
            fields[key] = (kind, None)
        except Exception:  # a type with no JSON schema: any value
            fields[key] = (Any, None)
    model: Any = create_model(graph.get_name("State"), **fields)
    shape: dict[str, Any] = model.model_json_schema()
    return shape


def _config_schema(graph: Any) -> dict[str, Any]:
    with warnings.catch_warnings():  # LangGraph's server reads it so too: `configurable` of the config
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        config = graph.config_schema()
    fields = getattr(config, "model_fields", None) or {}
    if "configurable" not in fields:
        return {}
    configurable: Any = fields["configurable"].annotation
    schema: dict[str, Any] = TypeAdapter(configurable).json_schema()
    for key in _INTERNAL_CONFIG_KEYS:
        schema.get("properties", {}).pop(key, None)
    return schema


def schemas(graph: Any) -> dict[str, Any]:
    """The graph's JSON schemas; one that cannot be made is null (logged), as LangGraph's server does."""
    makers = {
        "input_schema": graph.get_input_jsonschema,
        "output_schema": graph.get_output_jsonschema,
        "state_schema": lambda: _state_schema(graph),
        "config_schema": lambda: _config_schema(graph),
        "context_schema": graph.get_context_jsonschema,
    }
    found: dict[str, Any] = {}
    for name, make in makers.items():
        try:
            found[name] = jsonable(make())
        except Exception as exc:
            log.warning("graph %s: no %s: %s: %s", graph.name, name, type(exc).__name__, exc)
            found[name] = None
    return found


def subgraph_schemas(graph: Any, namespace: str | None, recurse: bool) -> dict[str, Any]:
    """Each subgraph's schemas by its namespace (`{}`: the graph has none)."""
    return {ns: schemas(sub) for ns, sub in graph.get_subgraphs(namespace=namespace, recurse=recurse)}
