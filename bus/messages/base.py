"""Shared parts of every envelope: ids, `Envelope`, `encode`/`decode`, file refs, usage, errors, `Reply`."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bus.errors import EnvelopeError


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


# Run and thread ids become subject tokens, KV keys and directory names: one safe token each.
ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$"
ID_RULE = "letters, digits, '_' and '-', at most 128, not starting with '-'"
Id = Annotated[str, Field(pattern=ID_PATTERN, description=f"{ID_RULE}; a UUID, say.")]


def is_valid_id(value: str) -> bool:
    """Whether `value` may be a run or thread id (see `ID_PATTERN`)."""
    return _ID.fullmatch(value) is not None


class Envelope(BaseModel):
    """Base of every message on the bus."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    v: Literal[1] = Field(1, description="Envelope schema version.")


E = TypeVar("E", bound=BaseModel)


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json(exclude_none=True).encode()


def decode(model: type[E], data: bytes | str) -> E:
    """Parse and validate one payload.

    Raises:
        EnvelopeError: not JSON, or not a valid `model`; the message says which fields.
    """
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(payload)"
            problems.append(f"{loc}: {err['msg']}")
        if exc.errors() and exc.errors()[0]["type"] == "json_invalid":
            raise EnvelopeError(model.__name__, f"not valid JSON ({exc.errors()[0]['msg']})") from None
        raise EnvelopeError(model.__name__, "; ".join(problems)) from None


_ID = re.compile(ID_PATTERN[1:-1])


# --------------------------------------------------------------------- shared parts


class FileRef(BaseModel):
    """A file travelling with a message: in the object store, or at a platform URL."""

    model_config = ConfigDict(extra="ignore")

    name: str
    content_type: str | None = None
    size: int | None = None
    object_name: str | None = Field(None, description="Key in the antler_files object store.")
    url: str | None = Field(None, description="Where a channel adapter can fetch it.")
    path: str | None = Field(
        None, description="Virtual path the agent sees, e.g. /mnt/user-data/outputs/a.md"
    )


class ChatOrigin(BaseModel):
    """Where a chat-started run came from, so its replies can find their way back."""

    model_config = ConfigDict(extra="ignore")

    channel: str
    chat_id: str
    topic_id: str | None = None
    message_id: str | None = None
    user_id: str | None = None
    platform: dict[str, Any] = Field(
        default_factory=dict, description="The inbound message's metadata, handed back with every reply."
    )


class Usage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class ModelTokens(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tokens: int = 0
    runs: int = 0


class ErrorInfo(BaseModel):
    """A failure a caller (or the model) can act on."""

    model_config = ConfigDict(extra="ignore")

    code: str = Field(
        description="not_found, not_allowed, invalid, timeout, too_large, conflict, internal ..."
    )
    message: str


# --------------------------------------------------------------------- request / reply


class Reply(Envelope):
    """Base of service replies: `error` is set when the request failed."""

    error: ErrorInfo | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
