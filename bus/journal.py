"""Where runs' journals (`RunJournal`) live: the `<prefix>_files` object store, one object per run.

journals/<user>/<thread>/<run>.json

Written once by the runner that ends the run (`agents.runner.journal`), read by the gateway's run
history API, deleted with the thread's other files. The object store has no age limit, unlike
the RUN_EVENTS stream (`bus.run_events_max_age_hours`), and no per-value size limit, unlike KV.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from datetime import UTC, datetime
from hashlib import sha256

from nats.js.api import Header, ObjectInfo, ObjectMetaOptions
from nats.js.errors import NotFoundError
from nats.js.kv import MSG_ROLLUP_SUBJECT
from nats.js.object_store import (
    OBJ_CHUNKS_PRE_TEMPLATE,
    OBJ_DEFAULT_CHUNK_SIZE,
    OBJ_DIGEST_TEMPLATE,
    OBJ_META_PRE_TEMPLATE,
    ObjectStore,
)

from bus.files import thread_prefix
from bus.messages import RunJournal, decode
from bus.tasks import wait_for

JOURNALS = "journals"


def journal_key(user_id: str, thread_id: str, run_id: str) -> str:
    return f"{thread_prefix(JOURNALS, user_id, thread_id)}{run_id}.json"


async def write_journal(store: ObjectStore, journal: RunJournal, *, new: bool = False) -> None:
    """Keep `journal`, replacing an earlier attempt's.

    `new`: no earlier version can exist (the run's first start writes it): the object is written
    in one round trip (`put_new_object`) instead of nats-py's three (a look for an earlier version,
    then each chunk and the meta message, one after the other). A `new` write over an earlier
    version would still replace it; only that version's chunks would stay behind in the stream.
    """
    name = journal_key(journal.user_id, journal.thread_id, journal.run_id)
    data = journal.model_dump_json().encode()  # Nones kept: rows say null
    if new:
        await put_new_object(store, name, data)
    else:
        await store.put(name, data)


async def put_new_object(store: ObjectStore, name: str, data: bytes, timeout: float = 10.0) -> None:
    """Write object `name` as nats-py's `ObjectStore.put` does (same chunks, same meta message),
    its chunks and meta published together and their acks awaited together: a run's end waits for
    one round trip to the store, not one per message. The stream stores them in the order sent
    (one connection), so a reader that sees the meta finds the chunks before it. A message not
    stored takes the object's messages away again (the object never existed before), and raises.
    """
    js = store._js
    nuid = js._nc._nuid.next().decode()
    chunk_subject = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=store._name, obj=nuid)
    meta_subject = OBJ_META_PRE_TEMPLATE.format(
        bucket=store._name, obj=base64.urlsafe_b64encode(name.encode()).decode()
    )
    size = OBJ_DEFAULT_CHUNK_SIZE
    chunks = [data[at : at + size] for at in range(0, len(data), size)]
    info = ObjectInfo(
        name=name,
        options=ObjectMetaOptions(max_chunk_size=size),
        bucket=store._name,
        nuid=nuid,
        size=len(data),
        chunks=len(chunks),
        mtime=datetime.now(UTC).isoformat(),
        digest=OBJ_DIGEST_TEMPLATE.format(digest=base64.urlsafe_b64encode(sha256(data).digest()).decode()),
    )
    acks = [await js.publish_async(chunk_subject, chunk) for chunk in chunks]
    rollup = {Header.ROLLUP: MSG_ROLLUP_SUBJECT}
    acks.append(await js.publish_async(meta_subject, json.dumps(info.as_dict()).encode(), headers=rollup))
    try:
        await wait_for(asyncio.gather(*acks), timeout)
    except BaseException:
        for future in acks:  # their outcome is no longer awaited: no "never retrieved" report
            future.cancel()
        for subject in (meta_subject, chunk_subject):
            with contextlib.suppress(Exception):
                await js.purge_stream(store._stream, subject=subject)
        raise


async def read_journal(store: ObjectStore, user_id: str, thread_id: str, run_id: str) -> RunJournal | None:
    """The run's journal, or None (not written yet: the run has not ended, or ended before journals)."""
    try:
        found = await store.get(journal_key(user_id, thread_id, run_id))
    except NotFoundError:
        return None
    if found.data is None or (found.info is not None and found.info.deleted):
        return None
    return decode(RunJournal, found.data)
