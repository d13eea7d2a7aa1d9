"""Run journals in the object store: one per attempt, a later attempt's replacing an earlier one's."""

from __future__ import annotations

import pytest

from bus import Bus
from bus.journal import journal_key, put_new_object, read_journal, write_journal
from bus.messages import RunJournal

pytestmark = pytest.mark.asyncio


def journal(status: str, attempt: int) -> RunJournal:
    return RunJournal(run_id="r1", thread_id="t1", user_id="ana", status=status, attempt=attempt, events=[])


async def chunks_in_store(bus: Bus) -> int:
    """Chunk messages left in the files stream (every version's, referenced or not)."""
    name = bus.subjects.files_store
    info = await bus.js.stream_info(f"OBJ_{name}", subjects_filter=f"$O.{name}.C.>")
    return sum((info.state.subjects or {}).values())


async def test_a_first_attempts_journal_is_kept_and_a_later_attempts_replaces_it_whole(bus: Bus) -> None:
    store = await bus.files()
    await write_journal(store, journal("error", 1), new=True)  # a run's first start: nothing to replace
    first = await read_journal(store, "ana", "t1", "r1")
    assert first is not None
    assert (first.status, first.attempt) == ("error", 1)
    await write_journal(store, journal("success", 2))  # the run resumed elsewhere and ended there
    second = await read_journal(store, "ana", "t1", "r1")
    assert second is not None
    assert (second.status, second.attempt) == ("success", 2)
    assert await chunks_in_store(bus) == 1, "the first attempt's chunks went with it"
    assert (await store.get_info(journal_key("ana", "t1", "r1"))).size > 0


async def test_an_object_written_in_one_round_trip_reads_back_whole_by_nats_pys_own_get(bus: Bus) -> None:
    """`put_new_object` writes what nats-py's `put` writes: `get` verifies its digest and chunk count,
    over several chunks as over none."""
    store = await bus.files()
    large = bytes(range(256)) * 1200  # 300 KB: three chunks
    await put_new_object(store, "journals/a/large.json", large)
    await put_new_object(store, "journals/a/empty.json", b"")
    found = await store.get("journals/a/large.json")
    assert found.data == large
    assert found.info is not None
    assert (found.info.size, found.info.chunks) == (len(large), 3)
    assert (await store.get("journals/a/empty.json")).data == b""
    await store.put("journals/a/large.json", b"replaced")  # and nats-py's own put replaces it as its own
    assert (await store.get("journals/a/large.json")).data == b"replaced"
