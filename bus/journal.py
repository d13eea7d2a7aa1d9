"""Where runs' journals (`RunJournal`) live: the `<prefix>_files` object store, one object per run.

journals/<user>/<thread>/<run>.json

Written once by the runner that ends the run (`agents.runner.journal`), read by the gateway's run
history API, deleted with the thread's other files. The object store has no age limit, unlike
the RUN_EVENTS stream (`bus.run_events_max_age_hours`), and no per-value size limit, unlike KV.
"""

from __future__ import annotations

from typing import Any

from nats.js.api import ObjectInfo
from nats.js.errors import NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from bus.files import thread_prefix
from bus.messages import RunJournal, decode

JOURNALS = "journals"


def journal_key(user_id: str, thread_id: str, run_id: str) -> str:
    return f"{thread_prefix(JOURNALS, user_id, thread_id)}{run_id}.json"


async def write_journal(store: ObjectStore, journal: RunJournal, *, new: bool = False) -> None:
    """Keep `journal`, replacing an earlier attempt's.

    `new`: no earlier version can exist (the run's first start writes it): the store is not asked
    for one first. nats-py looks an object up before every put, to delete the chunks of the version
    it replaces: a round trip, and a stream read in the server, for nothing on a run's first start.
    A `new` write over an earlier version would still replace it; only that version's chunks would
    stay behind in the stream.
    """
    target = _NewObject(store) if new else store
    await target.put(
        journal_key(journal.user_id, journal.thread_id, journal.run_id), journal.model_dump_json().encode()
    )  # Nones kept: rows say null


class _NewObject(ObjectStore):
    """`store` for writing objects known not to exist yet (`put` looks up no earlier version)."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store._name, store._stream, store._js)

    async def get_info(self, name: str, show_deleted: Any = False) -> ObjectInfo:
        raise ObjectNotFoundError


async def read_journal(store: ObjectStore, user_id: str, thread_id: str, run_id: str) -> RunJournal | None:
    """The run's journal, or None (not written yet: the run has not ended, or ended before journals)."""
    try:
        found = await store.get(journal_key(user_id, thread_id, run_id))
    except NotFoundError:
        return None
    if found.data is None or (found.info is not None and found.info.deleted):
        return None
    return decode(RunJournal, found.data)
