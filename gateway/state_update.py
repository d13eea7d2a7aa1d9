"""Checking a thread-state update (`POST /threads/{id}/state`) before it goes to a runner.

LangGraph raises on updates it cannot apply: a list where the lead agent's
state is an object, a node the graph does not have, a message it cannot coerce,
a value a reducer cannot merge (`artifacts: 5`). The runners' threads service
answers those as internal errors, so the gateway checks the same things first
and answers 422 naming the field. The rules come from the lead agent's own
state schema and graph, not a copy of them.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from pydantic import TypeAdapter, ValidationError

# Keys checked by other means (messages) or not at all (a structured response is whatever the model made).
_NOT_TYPED = {"messages", "structured_response"}


@dataclass(frozen=True)
class _StateRules:
    fields: dict[str, TypeAdapter[Any]]
    nodes: frozenset[str]


@functools.cache
def _rules() -> _StateRules:
    from agents.state import ThreadState
    from agents.threads import state_graph

    hints = typing.get_type_hints(ThreadState)  # reducers (Annotated) and NotRequired stripped
    fields = {key: TypeAdapter(hint) for key, hint in hints.items() if key not in _NOT_TYPED}
    return _StateRules(fields=fields, nodes=frozenset(state_graph(None).nodes))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def check_state_update(values: Any, as_node: str | None) -> None:
    """Raise a 422 for an update the lead agent's graph would refuse; keys it does not know are ignored
    (as LangGraph ignores them)."""
    rules = _rules()
    if as_node is not None and as_node not in rules.nodes:
        raise HTTPException(
            422, f"as_node: the lead agent has no node {as_node!r} (it has {', '.join(sorted(rules.nodes))})"
        )
    if values is None:
        return
    if not isinstance(values, dict):
        raise HTTPException(422, "values: the lead agent's state is an object of state keys, not a list")
    if "messages" in values:
        from langchain_core.messages import convert_to_messages

        messages = values["messages"]
        try:  # what LangGraph's add_messages reducer does with them
            convert_to_messages(messages if isinstance(messages, list) else [messages])
        except Exception as exc:
            raise HTTPException(422, f"values.messages: not messages ({_first_line(exc)})") from None
    for key, value in values.items():
        adapter = rules.fields.get(key)
        if adapter is None:
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in ("values", key, *error["loc"]))
            raise HTTPException(422, f"{where}: {error['msg']}") from None
