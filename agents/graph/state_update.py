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

from agents.graph.state import ThreadState

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


def _why_not_a_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        if error["loc"] and error["loc"][0] == "content":
            return "its content must be text or a list of content blocks"
        where = ".".join(str(p) for p in error["loc"])
        return f"{where}: {error['msg']}" if where else error["msg"]
    return _first_line(exc)


@functools.cache
def state_keys() -> list[str]:
    """The lead agent's state keys, from its schema."""
    return sorted(typing.get_type_hints(ThreadState))


def check_messages(messages: Any, where: str, *, single: bool = False) -> None:
    """Raise unless `messages` is a list of what LangGraph's add_messages reducer takes as messages
    (with `single`, one such message is taken too, as the reducer does)."""
    one = not isinstance(messages, list)
    if one and not single:
        raise InvalidStateUpdate(f"{where}: a list of messages, not {type(messages).__name__}")
    for index, message in enumerate([messages] if one else messages):
        try:
            convert_to_messages([message])
        except Exception as exc:  # the reducer's own conversion, whatever it raises
            which = "" if one else f"entry {index} is "
            raise InvalidStateUpdate(
                f"{where}: {which}not a message ({_why_not_a_message(exc)}); "
                'a message is {"role": "user", "content": "..."}'
            ) from None


def check_values(values: Any, where: str, *, unknown_keys: bool = True, single_message: bool = False) -> None:
    """Raise unless `values` is an object the lead agent's state can take: messages that are
    messages, every other key of its type.

    Args:
        where: the field `values` came in, which every message starts with (`input`, `values`).
        unknown_keys: whether keys the state does not have are let through (LangGraph ignores them).
        single_message: whether `messages` may be one message instead of a list.

    Raises:
        InvalidStateUpdate: naming the first field that does not fit.
    """
    if not isinstance(values, dict):
        raise InvalidStateUpdate(
            f"{where}: the lead agent's state is an object of state keys, not {type(values).__name__}"
        )
    if not unknown_keys:
        known = state_keys()
        for key in values:
            if key not in known:
                raise InvalidStateUpdate(
                    f"{where}.{key}: the lead agent's state has no key {key!r} (it has {', '.join(known)})"
                )
    if "messages" in values:
        check_messages(values["messages"], f"{where}.messages", single=single_message)
    fields = _field_types()
    for key, value in values.items():
        adapter = fields.get(key)
        if adapter is None:
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            error = exc.errors()[0]
            place = ".".join(str(p) for p in (where, key, *error["loc"]))
            raise InvalidStateUpdate(f"{place}: {error['msg']}") from None


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
    check_values(values, "values", single_message=True)
