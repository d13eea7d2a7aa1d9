"""Checking a thread-state update against the lead agent's state before LangGraph applies it.

LangGraph refuses some updates with an exception that names no field and
accepts others it then cannot merge (`artifacts: 5` breaks the reducer on the
next run). The threads service checks the same things first and answers
`invalid` naming the field (the gateway's 422). The rules come from the lead
agent's own state schema and graph, not a copy of them.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Collection
from typing import Any

from langchain_core.messages import convert_to_messages
from pydantic import TypeAdapter, ValidationError

from agents.state import ThreadState

# Keys checked by other means (messages) or not at all (a structured response is whatever the model made).
_NOT_TYPED = {"messages", "structured_response"}


class InvalidStateUpdate(ValueError):
    """An update the graph would refuse; the message starts with the field: `values.title: ...`."""


@functools.cache
def _field_types() -> dict[str, TypeAdapter[Any]]:
    hints = typing.get_type_hints(ThreadState)  # reducers (Annotated) and NotRequired stripped
    return {key: TypeAdapter(hint) for key, hint in hints.items() if key not in _NOT_TYPED}


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def check_state_update(values: Any, as_node: str | None, nodes: Collection[str]) -> None:
    """Raise for an update the lead agent's graph (with `nodes`) would refuse.

    Keys the state does not know are ignored, as LangGraph ignores them.

    Raises:
        InvalidStateUpdate: naming the first field that does not fit.
    """
    if as_node is not None and as_node not in nodes:
        raise InvalidStateUpdate(
            f"as_node: the lead agent has no node {as_node!r} (it has {', '.join(sorted(nodes))})"
        )
    if values is None:
        return
    if not isinstance(values, dict):
        raise InvalidStateUpdate("values: the lead agent's state is an object of state keys, not a list")
    if "messages" in values:
        messages = values["messages"]
        try:  # what LangGraph's add_messages reducer does with them
            convert_to_messages(messages if isinstance(messages, list) else [messages])
        except Exception as exc:
            raise InvalidStateUpdate(f"values.messages: not messages ({_first_line(exc)})") from None
    fields = _field_types()
    for key, value in values.items():
        adapter = fields.get(key)
        if adapter is None:
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in ("values", key, *error["loc"]))
            raise InvalidStateUpdate(f"{where}: {error['msg']}") from None
