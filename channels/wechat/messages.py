"""The XML messages WeChat and WeCom post to a callback URL, read into a pydantic model at the boundary.

Both platforms send `<xml>` with one element per field (`ToUserName`, `FromUserName`, `CreateTime`,
`MsgType`, `MsgId`, then the type's own: `Content`; `PicUrl` and `MediaId`; `FileName`; `Title`,
`Url`; `Label`; `Recognition`; `Event`; WeCom adds `AgentID`). Safe mode wraps it encrypted in an
`Encrypt` element of an outer `<xml>`. What cannot be read raises `MalformedMessage` with the reason
(the adapter dead-letters it).
"""

from __future__ import annotations

from typing import Any

import xmltodict
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from channels.errors import MalformedMessage

NEEDS = {  # message types and the fields they cannot do without
    "text": ("content",),
    "image": ("media_id",),
    "file": ("media_id",),
}


class CallbackMessage(BaseModel):
    """One message (or event) from a user, as the platform posted it."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", str_strip_whitespace=False)

    to_user: str = Field(alias="ToUserName", min_length=1)
    from_user: str = Field(alias="FromUserName", min_length=1)
    create_time: int = Field(alias="CreateTime")
    msg_type: str = Field(alias="MsgType", min_length=1)
    msg_id: str | None = Field(None, alias="MsgId")
    content: str | None = Field(None, alias="Content")
    pic_url: str | None = Field(None, alias="PicUrl")
    media_id: str | None = Field(None, alias="MediaId")
    file_name: str | None = Field(None, alias="FileName")
    title: str | None = Field(None, alias="Title")
    url: str | None = Field(None, alias="Url")
    label: str | None = Field(None, alias="Label")
    recognition: str | None = Field(None, alias="Recognition")
    event: str | None = Field(None, alias="Event")
    agent_id: str | None = Field(None, alias="AgentID")

    @model_validator(mode="after")
    def _complete(self) -> CallbackMessage:
        self.msg_type = self.msg_type.lower()
        for name in NEEDS.get(self.msg_type, ()):
            if getattr(self, name) is None:
                alias = type(self).model_fields[name].alias
                raise ValueError(f"a {self.msg_type} message without {alias}")
        if self.msg_type != "event" and not self.msg_id:
            raise ValueError(f"a {self.msg_type} message without MsgId")
        return self

    @property
    def ident(self) -> str:
        """What the platform's retries of this message repeat: its MsgId (events: sender and time)."""
        return self.msg_id or f"{self.from_user}-{self.create_time}"


def xml_fields(raw: bytes | str) -> dict[str, Any]:
    """The fields of an `<xml>` document; `MalformedMessage` if it is not one."""
    try:
        parsed = xmltodict.parse(raw, disable_entities=True)
    except Exception as exc:  # expat's ExpatError, or worse
        raise MalformedMessage(f"not XML ({exc})") from exc
    fields = parsed.get("xml") if isinstance(parsed, dict) else None
    if not isinstance(fields, dict):
        raise MalformedMessage("not an <xml> document with fields")
    return fields


def read_message(raw: bytes | str) -> CallbackMessage:
    """The message in `raw` (plain XML, or what an `Encrypt` element decrypted to)."""
    fields = xml_fields(raw)
    try:
        return CallbackMessage.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise MalformedMessage(problems) from exc


def _problem(error: Any) -> str:
    """One validation error as a reason: the element it is about, if any, and what is wrong."""
    text = str(error["msg"]).removeprefix("Value error, ")
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {text}" if where else text
