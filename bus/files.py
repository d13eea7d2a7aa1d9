"""Names of a thread's files in the `<prefix>_files` object store (shared by broker and gateway).

uploads/<user>/<thread>/<name>          what the user uploaded
outputs/<user>/<thread>/<relative path> what the agent wrote under /mnt/user-data/outputs
"""

from __future__ import annotations

from nats.js.api import ObjectInfo
from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore

from bus.subjects import safe_token

UPLOADS = "uploads"
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
