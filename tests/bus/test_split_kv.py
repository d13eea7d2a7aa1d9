"""The buckets written every turn (threads, runs, thread_runs) are one bucket per partition behind one
handle; an installation made with the single buckets of earlier versions moves to them losing
nothing, whichever processes saw the move begin and whichever did not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import pytest
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from bus import Bus, connect_and_provision, provision, split_kv
from bus.messages import MetricsSnapshot, RunRecord, RunRequest, ThreadRecord, encode, utcnow
from bus.records import RecordStore, drop_keys, keys_matching, repair_by_key
from bus.runs import latest_run, submit_run, thread_run_key
from bus.split_kv import MOVED, SplitKV, key_partition, partition_bucket
from bus.split_kv_retire import mark_moving
from config import BusConfig
from gateway.thread_view import ThreadView
from tests.support.unsplit import legacy_kv, make_unsplit_buckets

pytestmark = pytest.mark.asyncio


@pytest.fixture
def quick_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes look at the legacy bucket every 0.2 s and provisioning listens for processes of
    earlier versions for 0.5 s (so `antler provision` waits ~1.7 s, not 12)."""
    monkeypatch.setattr(split_kv, "REFRESH", 0.2)
    monkeypatch.setattr(split_kv, "LISTEN", 0.5)


async def runs(bus: Bus) -> RecordStore[RunRecord]:
    return RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)


async def threads(bus: Bus) -> RecordStore[ThreadRecord]:
    kv = await bus.kv(bus.subjects.threads_bucket)
    return RecordStore(kv, ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id"))


def chat_run(run_id: str, thread_id: str = "t1") -> RunRequest:
    return RunRequest(
        run_id=run_id, thread_id=thread_id, input={"messages": [{"role": "user", "content": "hi"}]}
    )


def record(run_id: str, thread_id: str = "t1", n: int = 0) -> RunRecord:
    return RunRecord(run_id=run_id, thread_id=thread_id, user_id="u1", metadata={"n": n})


async def search(bus: Bus, user_id: str) -> list[str]:
    view = ThreadView(bus.js, await bus.kv(bus.subjects.threads_bucket))
    try:
        found = await view.search(
            user_id, keep=lambda _: True, sort_by="updated_at", descending=True, offset=0, limit=100
        )
    finally:
        await view.close()
    return sorted(r.thread_id for r in found)


async def test_records_are_spread_over_the_partition_buckets_and_read_back_from_one_handle(bus: Bus) -> None:
    store = await runs(bus)
    ids = [f"run-{n}" for n in range(24)]
    for run_id in ids:
        assert await store.create(run_id, record(run_id))
    assert not await store.create("run-0", record("run-0")), "create refuses a key that exists"
    s = bus.subjects
    placed = {}
    for k in range(4):
        kv = await bus.js.key_value(partition_bucket(s.runs_bucket, k))
        placed[k] = set(await kv.keys()) if (await kv.status()).values else set()
    assert sum(1 for keys in placed.values() if keys) > 1, placed
    for run_id in ids:  # each in the bucket its id's hash names, and only there
        assert run_id in placed[key_partition(run_id, 4)]
        assert sum(run_id in keys for keys in placed.values()) == 1

    def bump(current: RunRecord | None) -> RunRecord | None:
        assert current is not None
        return current.model_copy(update={"metadata": {"n": current.metadata["n"] + 1}})

    await asyncio.gather(*(store.update("run-5", bump) for _ in range(10)))
    assert (await store.get("run-5") or record("x")).metadata["n"] == 10, "compare-and-set across writers"
    await store.delete("run-6")
    assert await store.get("run-6") is None
    assert sorted(await store.keys()) == sorted(set(ids) - {"run-6"})


async def test_a_threads_runs_are_listed_from_its_partitions_bucket(bus: Bus) -> None:
    for n in range(3):
        await submit_run(bus, chat_run(f"r{n}"))
    keys = await keys_matching(bus.js, bus.subjects.thread_runs_bucket, "t1.>")
    assert [key.rsplit(".", 1)[1] for key in keys] == ["r0", "r1", "r2"]
    assert await latest_run(bus, "t1") == "r2"
    await drop_keys(bus.js, bus.subjects.thread_runs_bucket, "t1.>")
    assert await keys_matching(bus.js, bus.subjects.thread_runs_bucket, "t1.>") == []


async def test_records_made_before_the_split_are_read_updated_and_listed_after_the_upgrade_and_the_move(
    nats_url: str, bus_config: BusConfig, quick_refresh: None
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)
    s = old.subjects
    # What an earlier version wrote: a thread, a run of it, and the run listed with its thread.
    legacy_threads = await legacy_kv(old, s.threads_bucket)
    legacy_runs = await legacy_kv(old, s.runs_bucket)
    legacy_index = await legacy_kv(old, s.thread_runs_bucket)
    thread = ThreadRecord(thread_id="t-old", user_id="u1", title="from before")
    await legacy_threads.put("t-old", encode(thread))
    before = record("r-old", "t-old")
    await legacy_runs.put("r-old", encode(before))
    await legacy_index.put(thread_run_key("t-old", "r-old", before.created_at), b"")

    # Upgraded components start (their provisioning does not move anything).
    bus = await connect_and_provision(nats_url, bus_config)
    try:
        assert (await (await threads(bus)).get("t-old") or thread).title == "from before"
        await (await runs(bus)).update("r-old", lambda r: r and r.model_copy(update={"metadata": {"n": 1}}))
        # Written where earlier versions still running read it.
        assert RunRecord.model_validate_json((await legacy_runs.get("r-old")).value or b"").metadata == {
            "n": 1
        }
        await submit_run(bus, chat_run("r-new", thread_id="t-old"))
        assert (await legacy_runs.get("r-new")).value, "a new run is seen by earlier versions too"
        assert await search(bus, "u1") == ["t-old"]

        # `antler provision`: the records move to the buckets per partition; the old buckets go.
        await provision(bus, retire=True)
        for bucket in s.split_buckets:
            with pytest.raises(BucketNotFoundError):
                await bus.js.key_value(bucket)
        new_thread = await bus.js.key_value(partition_bucket(s.threads_bucket, key_partition("t-old", 4)))
        assert (
            ThreadRecord.model_validate_json((await new_thread.get("t-old")).value or b"").title
            == "from before"
        )

        # Read, updated and listed afterwards, by the processes that ran through the move and by new ones.
        again = await connect_and_provision(nats_url, bus_config)
        try:
            for reader in (bus, again):
                got = await (await runs(reader)).get("r-old")
                assert got is not None
                assert got.metadata == {"n": 1}
                assert await (await runs(reader)).get("r-new") is not None
                keys = await keys_matching(reader.js, s.thread_runs_bucket, "t-old.>")
                assert sorted(key.rsplit(".", 1)[1] for key in keys) == ["r-new", "r-old"]
                assert await search(reader, "u1") == ["t-old"]
            await (await threads(again)).update(
                "t-old", lambda t: t and t.model_copy(update={"title": "after"})
            )
            assert (await (await threads(bus)).get("t-old") or thread).title == "after"
        finally:
            await again.close()
    finally:
        await bus.close()
        await old.close()


async def test_writes_racing_the_move_from_processes_that_saw_it_begin_and_that_did_not_all_count(
    nats_url: str, bus_config: BusConfig, quick_refresh: None
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)
    s = old.subjects
    ids = [f"r{n}" for n in range(6)]
    legacy_runs = await legacy_kv(old, s.runs_bucket)
    for run_id in ids:
        await legacy_runs.put(run_id, encode(record(run_id)))
    stale, moving, mover = [await connect_and_provision(nats_url, bus_config) for _ in range(3)]
    try:
        # One process has not looked at the legacy bucket since the move began (it writes there as
        # before); one has.
        stale_kv = await stale.kv(s.runs_bucket)
        assert isinstance(stale_kv, SplitKV)
        await stale_kv.legacy()
        split_kv.REFRESH = 3600.0  # `stale` keeps what it saw; the fixture puts REFRESH back
        await mark_moving(mover, s.runs_bucket)
        assert (await stale_kv.legacy())[1] is False
        moving_kv = await moving.kv(s.runs_bucket)
        assert isinstance(moving_kv, SplitKV)
        assert (await moving_kv.legacy(fresh=True))[1] is True

        def bump(current: RunRecord | None) -> RunRecord | None:
            assert current is not None
            return current.model_copy(update={"metadata": {"n": current.metadata["n"] + 1}})

        async def writes(bus: Bus) -> None:
            store = await runs(bus)
            for _ in range(8):
                for run_id in ids:
                    await store.update(run_id, bump)

        mover_kv = await mover.kv(s.runs_bucket)
        assert isinstance(mover_kv, SplitKV)
        await asyncio.gather(writes(stale), writes(moving), mover_kv.move_all())
        counts = {
            run_id: (await (await runs(moving)).get(run_id) or record("x")).metadata["n"] for run_id in ids
        }
        assert counts == dict.fromkeys(ids, 16), "every write of both processes is in the record"
    finally:
        for bus in (stale, moving, mover):
            await bus.close()
        await old.close()


async def test_a_record_whose_move_stopped_half_way_is_read_and_its_next_write_finishes_it(
    nats_url: str, bus_config: BusConfig, quick_refresh: None
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)
    s = old.subjects
    legacy_runs = await legacy_kv(old, s.runs_bucket)
    # A mover replaced the record by its marker, then stopped before the copy.
    await legacy_runs.put("r-half", MOVED + encode(record("r-half", n=7)))
    bus = await connect_and_provision(nats_url, bus_config)
    try:
        store = await runs(bus)
        assert (await store.get("r-half") or record("x")).metadata == {"n": 7}
        await store.update("r-half", lambda r: r and r.model_copy(update={"metadata": {"n": 8}}))
        part = await bus.js.key_value(partition_bucket(s.runs_bucket, key_partition("r-half", 4)))
        assert RunRecord.model_validate_json((await part.get("r-half")).value or b"").metadata == {"n": 8}
        assert (await store.get("r-half") or record("x")).metadata == {"n": 8}
        await store.delete("r-half")
        assert await store.get("r-half") is None
        with pytest.raises(KeyNotFoundError):
            await legacy_runs.get("r-half")
    finally:
        await bus.close()
        await old.close()


async def test_a_new_installation_has_no_single_bucket_and_its_handles_never_look_for_one_twice(
    bus: Bus,
) -> None:
    kv = await bus.kv(bus.subjects.runs_bucket)
    assert isinstance(kv, SplitKV)
    assert await kv.legacy() == (None, False)
    thread = str(uuid.uuid4())
    assert await keys_matching(bus.js, bus.subjects.thread_runs_bucket, f"{thread}.>") == []


async def test_the_single_buckets_are_kept_while_a_process_of_an_earlier_version_runs(
    nats_url: str, bus_config: BusConfig, quick_refresh: None, caplog: pytest.LogCaptureFixture
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)
    s = old.subjects
    legacy_runs = await legacy_kv(old, s.runs_bucket)
    await legacy_runs.put("r-kept", encode(record("r-kept")))
    # A runner of an earlier version: its metrics say nothing of the split.
    snapshot = MetricsSnapshot(
        process="elsewhere:41",
        host="elsewhere",
        pid=41,
        components=["runner"],
        started_at=utcnow(),
        interval_seconds=0.1,
        text="",
    ).model_dump(mode="json", exclude={"split_buckets"})
    stop = asyncio.Event()

    async def earlier_runner() -> None:
        while not stop.is_set():
            await old.nc.publish(s.metrics("runner", "elsewhere:41"), json.dumps(snapshot).encode())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)

    running = asyncio.create_task(earlier_runner())
    bus = await connect_and_provision(nats_url, bus_config)
    try:
        await provision(bus, retire=True)
        assert "1 process(es) of an earlier version still use them (runner@elsewhere:41)" in caplog.text
        # Untouched: the earlier runner reads and writes it as before.
        assert (
            RunRecord.model_validate_json((await legacy_runs.get("r-kept")).value or b"").run_id == "r-kept"
        )
        metadata = (await bus.js.stream_info(f"KV_{s.runs_bucket}")).config.metadata or {}
        assert split_kv.MOVING_KEY not in metadata, "not even marked as moving"

        stop.set()  # upgraded: the next `antler provision` moves the records
        await running
        await provision(bus, retire=True)
        with pytest.raises(BucketNotFoundError):
            await bus.js.key_value(s.runs_bucket)
        assert (await (await runs(bus)).get("r-kept") or record("x")).run_id == "r-kept"
    finally:
        stop.set()
        await running
        await bus.close()
        await old.close()


async def test_components_upgraded_before_provisioning_made_the_buckets_work_on_the_single_ones(
    nats_url: str, bus_config: BusConfig
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)  # no bucket per partition yet
    s = old.subjects
    await (await legacy_kv(old, s.runs_bucket)).put("r-old", encode(record("r-old")))
    bus = await Bus.connect(nats_url, bus_config, name="upgraded")  # components do not provision
    try:
        store = await runs(bus)
        assert (await store.get("r-old") or record("x")).run_id == "r-old"
        assert await store.get("r-missing") is None
        await store.update("r-old", lambda r: r and r.model_copy(update={"metadata": {"n": 3}}))
        assert await store.create("r-new", record("r-new"))
        assert sorted(await store.keys()) == ["r-new", "r-old"]
        await submit_run(bus, chat_run("r-listed", thread_id="t-up"))
        listed = await keys_matching(bus.js, s.thread_runs_bucket, "t-up.>")
        assert [key.rsplit(".", 1)[1] for key in listed] == ["r-listed"]
        # All of it in the single buckets, where earlier versions read.
        legacy_runs = await legacy_kv(old, s.runs_bucket)
        assert RunRecord.model_validate_json((await legacy_runs.get("r-old")).value or b"").metadata == {
            "n": 3
        }
        assert (await legacy_runs.get("r-new")).value
    finally:
        await bus.close()
        await old.close()


async def test_a_value_put_by_a_process_that_missed_the_move_is_not_hidden_by_the_moved_copy(
    nats_url: str, bus_config: BusConfig, quick_refresh: None
) -> None:
    old = await make_unsplit_buckets(nats_url, bus_config)
    s = old.subjects
    await (await legacy_kv(old, s.runs_bucket)).put("r-put", encode(record("r-put", n=1)))
    stale, moving = [await connect_and_provision(nats_url, bus_config) for _ in range(2)]
    try:
        stale_kv = await stale.kv(s.runs_bucket)
        assert isinstance(stale_kv, SplitKV)
        await stale_kv.legacy()  # seen before the move began, and trusted for long
        split_kv.REFRESH = 3600.0
        await mark_moving(moving, s.runs_bucket)
        moving_kv = await moving.kv(s.runs_bucket)
        assert isinstance(moving_kv, SplitKV)
        await moving_kv.legacy(fresh=True)
        await (await runs(moving)).update(
            "r-put", lambda r: r and r.model_copy(update={"metadata": {"n": 2}})
        )
        await (await runs(stale)).put("r-put", record("r-put", n=3))
        for reader in (stale, moving):
            assert (await (await runs(reader)).get("r-put") or record("x")).metadata == {"n": 3}
        split_kv.REFRESH = 0.2
        await provision(moving, retire=True)
        assert (await (await runs(moving)).get("r-put") or record("x")).metadata == {"n": 3}
    finally:
        for bus in (stale, moving):
            await bus.close()
        await old.close()
