"""LangGraph's checkpoint serializer, each message encoded once while it is unchanged.

A checkpoint holds the thread's whole `messages` list, and LangGraph writes one at every step of a
run: each of those writes encoded every message of the thread again (a pydantic `model_dump` and a
msgpack of it per message, in Python), so a turn's checkpoint cost grew with the thread's length (a
fifth of a runner's CPU in a 1 500-turn chat). Here a message's encoding is kept beside it: the
bytes it was read from (a message restored from the last checkpoint), or those it was first written
as. It is used again while the message's fields are the very objects they were then, at the same
lengths; a message changed since (LangGraph gives an id to one that had none, a field replaced, a
list or dict field grown or shrunk) is encoded afresh. The bytes are those LangGraph would write.

Kept per message object, dropped with it (a weak reference): nothing outlives the runs that hold
the messages.
"""

from __future__ import annotations

import weakref
from typing import Any

import ormsgpack
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.jsonplus import EXT_PYDANTIC_V2, JsonPlusSerializer

# id(message) -> (a weak reference to it, its fields as they were, its encoding)
_Entry = tuple["weakref.ref[BaseMessage]", tuple[Any, ...], ormsgpack.Ext]
# Single dict operations only (atomic under the GIL): encodings are made on the checkpoint thread,
# messages are dropped on any thread, and a weak reference's callback may run inside either.
_kept: dict[int, _Entry] = {}


def _fields(message: BaseMessage) -> tuple[Any, ...]:
    """The message's field values, and the length of each sized one: what `_unchanged` compares."""
    values = tuple(message.__dict__.values())
    return values + tuple(len(v) if isinstance(v, list | dict | str) else -1 for v in values)


def _unchanged(kept: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    half = len(kept) // 2
    return (
        len(kept) == len(now)
        and all(a is b for a, b in zip(kept[:half], now[:half], strict=True))
        and (kept[half:] == now[half:])
    )


def _keep(message: BaseMessage, encoded: ormsgpack.Ext) -> None:
    key = id(message)

    def forget(_: object, key: int = key) -> None:
        _kept.pop(key, None)

    _kept[key] = (weakref.ref(message, forget), _fields(message), encoded)


def _kept_encoding(message: BaseMessage) -> ormsgpack.Ext | None:
    entry = _kept.get(id(message))
    if entry is None or entry[0]() is not message or not _unchanged(entry[1], _fields(message)):
        return None
    return entry[2]


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseMessage):
        kept = _kept_encoding(obj)
        if kept is not None:
            return kept
        encoded = jsonplus._msgpack_default(obj)
        if isinstance(encoded, ormsgpack.Ext):
            _keep(obj, encoded)
        return encoded
    return jsonplus._msgpack_default(obj)


class MessageKeepingSerializer(JsonPlusSerializer):
    """`JsonPlusSerializer`, its messages' encodings kept (see the module's docstring)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, bytes | bytearray):
            return super().dumps_typed(obj)
        try:
            return "msgpack", ormsgpack.packb(obj, default=_default, option=jsonplus._option)
        except ormsgpack.MsgpackEncodeError:
            return super().dumps_typed(obj)  # its own way: pickled if so configured, else the error

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind != "msgpack":
            return super().loads_typed(data)
        unpack = self._unpack_ext_hook

        def hook(code: int, encoded: bytes) -> Any:
            obj = unpack(code, encoded)
            if code == EXT_PYDANTIC_V2 and isinstance(obj, BaseMessage):
                _keep(obj, ormsgpack.Ext(code, encoded))
            return obj

        return ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
