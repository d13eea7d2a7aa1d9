"""Records in KV: compare-and-set updates, and records that no longer validate."""

from __future__ import annotations

import json

import pytest

from bus import Bus, EnvelopeError
from bus.messages import ThreadRecord, Usage
from bus.records import RecordStore, repair_by_key

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    ("stored", "kept"),
    [
        pytest.param(
            {"thread_id": "t1", "user_id": "ann", "title": "Cats", "status": "paused"},
            {"user_id": "ann", "title": "Cats", "status": "idle"},
            id="a-value-only-a-newer-version-knows",
        ),
        pytest.param(
            {"thread_id": "other", "user_id": "ann", "usage": {"total_tokens": "many"}, "finished_runs": 3},
            {"thread_id": "t1", "user_id": "ann", "usage": Usage(), "finished_runs": 3},
            id="a-broken-nested-field-and-another-id",
        ),
        pytest.param(None, {"thread_id": "t1", "user_id": "default"}, id="not-json"),
    ],
)
async def test_a_record_that_fails_validation_is_read_as_far_as_it_can_be_and_written_back(
    bus: Bus, stored: dict[str, object] | None, kept: dict[str, object]
) -> None:
    kv = await bus.kv(bus.subjects.threads_bucket)
    await kv.put("t1", b"{not json" if stored is None else json.dumps(stored).encode())
    with pytest.raises(EnvelopeError):
        await RecordStore(kv, ThreadRecord).get("t1")

    store = RecordStore(kv, ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id"))
    record = await store.get("t1")
    assert record is not None
    assert {name: getattr(record, name) for name in kept} == kept

    await store.update("t1", lambda current: None)  # a change that changes nothing still mends it
    mended = await RecordStore(kv, ThreadRecord).get("t1")
    assert mended is not None
    moments = {"created_at", "updated_at"}  # ones that could not be read are the repair's own
    assert mended.model_dump(exclude=moments) == record.model_dump(exclude=moments)
