"""Names of a thread's files in the `<prefix>_files` object store (shared by broker and gateway).

uploads/<user>/<thread>/<name>          what the user uploaded
outputs/<user>/<thread>/<relative path> what the agent wrote under /mnt/user-data/outputs
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

from nats.js.api import ObjectInfo, ObjectMeta
from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore

from bus.messages import FileRef
from bus.subjects import safe_token

UPLOADS = "uploads"
INBOX = "inbox"
OUTPUTS = "outputs"


def thread_prefix(kind: str, user_id: str, thread_id: str) -> str:
    return f"{kind}/{safe_token(user_id)}/{safe_token(thread_id)}/"


def upload_key(user_id: str, thread_id: str, name: str) -> str:
    return thread_prefix(UPLOADS, user_id, thread_id) + name


def output_key(user_id: str, thread_id: str, relative_path: str) -> str:
    return thread_prefix(OUTPUTS, user_id, thread_id) + relative_path.lstrip("/")


async def list_objects(store: ObjectStore, prefix: str = "") -> list[ObjectInfo]:
    """Live (not deleted) objects whose names start with `prefix`; an empty store is an empty list."""
    try:
        infos = await store.list(ignore_deletes=True)
    except NotFoundError:  # nats-py's answer for a store without objects
        return []
    return [info for info in infos if info.name.startswith(prefix) and not info.deleted]


def inbox_prefix(channel: str, chat_id: str) -> str:
    """Where an adapter stages the files sent in one chat (`inbox_key`): nothing else is that chat's."""
    return f"{INBOX}/{safe_token(channel)}/{safe_token(chat_id)}/"


def inbox_key(channel: str, chat_id: str, message_id: str, name: str) -> str:
    return (
        f"{INBOX}/{safe_token(channel)}/{safe_token(chat_id)}/{safe_token(message_id)}/{safe_filename(name)}"
    )


def safe_filename(name: str) -> str:
    """A file name that is just a name: no folders, no control characters, no leading dots."""
    name = unicodedata.normalize("NFC", name or "")
    name = PurePosixPath(name.replace("\\", "/")).name
    name = re.sub(r"[\x00-\x1f\x7f/]", "", name).strip().lstrip(".")
    name = re.sub(r"\s+", " ", name)
    if len(name) > 200:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: 200 - len(ext) - 1] + "." + ext) if dot and len(ext) < 12 else name[:200]
    return name or "upload"


async def stage_chat_file(
    store: ObjectStore,
    channel: str,
    chat_id: str,
    message_id: str,
    name: str,
    data: bytes,
    content_type: str | None,
) -> FileRef:
    """Put a file sent into a chat where the router picks it up (and moves it into the thread's uploads)."""
    key = inbox_key(channel, chat_id, message_id, name)
    await store.put(key, data, meta=ObjectMeta(name=key, headers={"Content-Type": content_type or ""}))
    return FileRef(name=name, content_type=content_type, size=len(data), object_name=key)
