"""Provisioning the streams, buckets and object store: complete and idempotent."""

from __future__ import annotations

import asyncio

import pytest
from nats.js.api import KeyValueConfig, RetentionPolicy, StreamConfig, StreamInfo, SubjectTransform
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError

from bus import Bus, connect_and_provision, provision
from bus.chat_partitions import chat_in_subject, chat_partitions, partition_of, stored_count
from bus.errors import BusError
from bus.provision import _ensure_kv
from bus.subjects import chat_route, partition_transform
from config import BusConfig
from tests.support.runs import run_events_place
from tests.support.unsplit import make_unsplit_installation

pytestmark = pytest.mark.asyncio


async def test_everything_of_the_architecture_exists_under_the_prefix(bus: Bus) -> None:
    s = bus.subjects
    p = bus.config.prefix.upper()
    expected = {
        # One inbound stream per chat partition; partition 0's also takes what comes without one.
        f"{p}_CHAT_IN_0": (
            RetentionPolicy.WORK_QUEUE,
            [f"{s.prefix}.chat.in.*.*.0", f"{s.prefix}.chat.in.*", f"{s.prefix}.chat.in.*.*"],
        ),
        **{
            f"{p}_CHAT_IN_{k}": (RetentionPolicy.WORK_QUEUE, [f"{s.prefix}.chat.in.*.*.{k}"])
            for k in (1, 2, 3)
        },
        f"{p}_CHAT_OUT": (RetentionPolicy.LIMITS, [f"{s.prefix}.chat.out.>"]),
        f"{p}_RUNS": (RetentionPolicy.WORK_QUEUE, [f"{s.prefix}.runs.submit"]),
        # A chat's runs' events in the chat's partition, other runs' by id (bus.run_events).
        **{
            f"{p}_RUN_EVENTS_{k}": (
                RetentionPolicy.LIMITS,
                [f"{s.prefix}.runs.ev.*.chat.*.{k}", f"{s.prefix}.runs.ev.*.api.{k}"],
            )
            for k in range(4)
        },
        f"{p}_SUBAGENTS": (RetentionPolicy.WORK_QUEUE, [f"{s.prefix}.subagents.submit"]),
        f"{p}_MEMORY": (RetentionPolicy.WORK_QUEUE, [f"{s.prefix}.memory.update.>"]),
        f"{p}_EVENTS": (RetentionPolicy.LIMITS, [f"{s.prefix}.events.>"]),
        f"{p}_DLQ": (RetentionPolicy.LIMITS, [f"{s.prefix}.dlq.>"]),
    }
    for name, (retention, subjects) in expected.items():
        info = await bus.js.stream_info(name)
        assert info.config.retention == retention, name
        assert info.config.subjects == subjects, name
        # Subagent tasks are one per tool call for as long as their results are kept.
        window = bus.config.subagent_results_ttl_hours * 3600 if name == f"{p}_SUBAGENTS" else None
        assert info.config.duplicate_window == (window or bus.config.dedupe_window_seconds), name
    memory = (await bus.js.stream_info(f"{p}_MEMORY")).config
    assert memory.max_msgs_per_subject == 1, "the newest conversation of each thread only"
    assert memory.max_age == bus.config.memory_updates_max_age_hours * 3600, "bounded, should no updater run"
    assert memory.max_bytes == int(bus.config.memory_updates_max_mb * 1024 * 1024)
    for bucket in ("chats", "subagent_results", "memory"):
        kv = await bus.js.key_value(f"{s.prefix}_{bucket}")
        await kv.put("probe", b"1")
        assert (await kv.get("probe")).value == b"1"
    # The buckets written every turn are one per partition (bus.split_kv), behind one handle.
    for bucket in ("threads", "runs", "thread_runs"):
        for k in range(4):
            await bus.js.key_value(f"{s.prefix}_{bucket}_{k}")
        with pytest.raises(BucketNotFoundError):
            await bus.js.key_value(f"{s.prefix}_{bucket}")
        kv = await bus.kv(f"{s.prefix}_{bucket}")
        await kv.put("probe", b"1")
        assert (await kv.get("probe")).value == b"1"
    files = await bus.files()
    await files.put("probe.txt", b"hello")
    assert (await files.get("probe.txt")).data == b"hello"


async def test_provisioning_again_keeps_data_and_applies_changed_settings(nats_url: str, bus: Bus) -> None:
    subject, stream = await run_events_place(bus, "r1")
    await bus.publish(subject, b"{}")
    kv = await bus.kv(bus.subjects.runs_bucket)
    await kv.put("r1", b"kept")

    longer = bus.config.model_copy(update={"run_events_max_age_hours": 48.0})
    again = await connect_and_provision(nats_url, longer)
    try:
        await asyncio.gather(provision(again), provision(again))  # concurrent starts are fine too
        info = await again.js.stream_info(stream)
        assert info.config.max_age == 48 * 3600
        assert info.state.messages == 1
        assert (await kv.get("r1")).value == b"kept"
    finally:
        await again.close()


async def test_two_prefixes_on_one_server_do_not_see_each_other(nats_url: str, bus: Bus) -> None:
    # The same admin user (the admin may do anything) with a second prefix.
    other_config = bus.config.model_copy(update={"prefix": bus.config.prefix + "x"})
    other = await connect_and_provision(nats_url, other_config)
    try:
        await other.publish(other.subjects.runs_submit, b"{}")
        mine = await bus.js.stream_info(bus.subjects.runs_stream)
        theirs = await other.js.stream_info(other.subjects.runs_stream)
        assert mine.state.messages == 0
        assert theirs.state.messages == 1
    finally:
        await other.close()


async def test_a_bucket_from_before_direct_gets_keeps_its_records_and_reads_them_directly(
    nats_url: str, bus: Bus
) -> None:
    # As provisioning made buckets before: reads went through the JSON stream API.
    bucket = f"{bus.subjects.prefix}_old"
    await bus.js.create_key_value(KeyValueConfig(bucket=bucket, history=1))
    old = await bus.js.key_value(bucket)
    await old.put("kept", b"value")
    await old.put("gone", b"x")
    await old.delete("gone")
    assert not (await bus.js.stream_info(f"KV_{bucket}")).config.allow_direct

    await _ensure_kv(bus, bucket)
    assert (await bus.js.stream_info(f"KV_{bucket}")).config.allow_direct
    again = await bus.js.key_value(bucket)
    assert (await again.get("kept")).value == b"value"
    with pytest.raises(KeyNotFoundError):
        await again.get("gone")
    with pytest.raises(KeyNotFoundError):
        await again.get("never")
    for name in ("threads_0", "runs_3", "chats"):
        info = await bus.js.stream_info(f"KV_{bus.subjects.prefix}_{name}")
        assert info.config.allow_direct, "one server: a new bucket is read by direct get"


def partitions_of(info: StreamInfo) -> int | None:
    return stored_count(info)


async def test_a_new_installation_has_four_chat_partitions_and_an_older_one_keeps_its_count(
    nats_url: str, bus_config: BusConfig
) -> None:
    """An installation made when the default was 16 is upgraded without a message stranded in a
    partition no router serves any more: its streams, and so its routers, keep 16."""
    older = bus_config.model_copy(update={"prefix": f"{bus_config.prefix}o", "chat_partitions": 16})
    fresh = bus_config.model_copy(update={"prefix": f"{bus_config.prefix}n"})
    old_bus = await connect_and_provision(nats_url, older)
    new_bus = await connect_and_provision(nats_url, fresh)
    try:
        assert await chat_partitions(new_bus) == 4
        for stream in (
            new_bus.subjects.chat_in_partition_stream(0),
            new_bus.subjects.run_events_partition_stream(0),
        ):
            assert partitions_of(await new_bus.js.stream_info(stream)) == 4
        # The same installation, provisioned by a version (or a process) with no count set.
        no_count = older.model_copy(update={"chat_partitions": None})
        unset = await connect_and_provision(nats_url, no_count)
        try:
            assert await chat_partitions(unset) == 16
            for stream in (
                unset.subjects.chat_in_partition_stream(0),
                unset.subjects.run_events_partition_stream(15),
            ):
                assert partitions_of(await unset.js.stream_info(stream)) == 16
        finally:
            await unset.close()
    finally:
        await old_bus.close()
        await new_bus.close()


async def test_a_new_partition_count_waits_until_nothing_waits_in_chat_in(
    nats_url: str, bus_config: BusConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = bus_config.model_copy(update={"prefix": f"{bus_config.prefix}c", "chat_partitions": 16})
    first = await connect_and_provision(nats_url, config)
    eight = config.model_copy(update={"chat_partitions": 8})
    try:
        await first.publish(await chat_in_subject(first, "telegram", "42"), b"{}")
        changed = await connect_and_provision(nats_url, eight)
        try:
            assert await chat_partitions(changed) == 16, "a message waits under the old count"
            assert "still hold 1 message(s)" in caplog.text
            for k in range(16):  # the routers answered it
                await changed.js.purge_stream(changed.subjects.chat_in_partition_stream(k))
            await provision(changed)
            assert await chat_partitions(changed) == 8
            with pytest.raises(NotFoundError):  # partitions 8 to 15 are gone with the count
                await changed.js.stream_info(changed.subjects.chat_in_partition_stream(8))
            run_events = await changed.js.stream_info(changed.subjects.run_events_partition_stream(7))
            assert partitions_of(run_events) == 8
        finally:
            await changed.close()
    finally:
        await first.close()


async def test_a_chat_goes_to_the_partition_nats_servers_own_partition_function_gives_it(bus: Bus) -> None:
    """Publishers pick a chat's partition stream themselves: with the hash the streams' transforms
    used before the split, so a chat keeps its partition (and its router) across the upgrade."""
    s = bus.subjects
    name = f"{s.prefix.upper()}_HASHCHECK"
    source, dest = partition_transform(s.full("hashcheck.*"), 7)
    await bus.js.add_stream(
        StreamConfig(name=name, subjects=[source], subject_transform=SubjectTransform(source, dest))
    )
    try:
        routes = [chat_route("telegram", str(n)) for n in range(40)] + [chat_route("slack", "C0-ü")]
        for route in routes:
            await bus.js.publish(s.full(f"hashcheck.{route}"), b"")
        for seq, route in enumerate(routes, start=1):
            stored = await bus.js.get_msg(name, seq)
            assert stored.subject == s.full(f"hashcheck.{route}.{partition_of(route, 7)}")
    finally:
        await bus.js.delete_stream(name)


async def test_an_installation_from_before_the_split_is_moved_without_losing_what_waits(
    nats_url: str, bus_config: BusConfig
) -> None:
    """The single CHAT_IN of an earlier version stops taking messages but keeps what waits (routers
    drain it); `antler provision` removes it only once it is empty."""
    config = bus_config.model_copy(update={"prefix": f"{bus_config.prefix}m"})
    old = await make_unsplit_installation(nats_url, config, waiting=3)
    s = old.subjects
    try:
        await provision(old)
        legacy = await old.js.stream_info(s.unsplit_chat_in_stream)
        assert legacy.state.messages == 3, "what waited is still there, for the routers"
        assert legacy.config.subjects == [s.full("unsplit.chat.in")], "and nothing new goes there"
        for k in range(4):
            info = await old.js.stream_info(s.chat_in_partition_stream(k))
            assert stored_count(info) == 4
        await provision(old, retire=True)
        assert (await old.js.stream_info(s.unsplit_chat_in_stream)).state.messages == 3, "kept: not drained"
        await old.js.purge_stream(s.unsplit_chat_in_stream)  # the routers answered it
        await provision(old, retire=True)
        with pytest.raises(NotFoundError):
            await old.js.stream_info(s.unsplit_chat_in_stream)
        assert await chat_partitions(old) == 4
    finally:
        await old.close()


async def test_a_disk_without_room_for_the_memory_stream_is_named_with_the_setting_to_lower(
    nats_url: str, bus_config: BusConfig
) -> None:
    """10 PB is more than the worker's server (or any disk's free space) has room for."""
    huge = bus_config.model_copy(update={"memory_updates_max_mb": 10.0 * 1024**3})
    with pytest.raises(BusError) as raised:
        await connect_and_provision(nats_url, huge, name="test")
    message = str(raised.value)
    assert "no room to reserve" in message
    assert "_MEMORY" in message
    assert "bus.memory_updates_max_mb" in message
    assert "Free disk space" in message
