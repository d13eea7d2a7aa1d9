"""Stopping a deleted thread's background tasks (`agents.subagents.background`): shared by the
threads service, which deletes threads, and the subagent executor, which runs the tasks."""

from __future__ import annotations

from bus import Bus
from bus.messages import BackgroundTask, SubagentCancel
from bus.records import RecordStore, drop_keys, keys_matching
from bus.subjects import safe_token

__all__ = ["stop_thread_tasks"]


async def stop_thread_tasks(bus: Bus, thread_id: str) -> None:
    """A deleted thread's background tasks: their records removed first (so none reports back, and
    one still waiting for an executor never starts), then each asked to stop."""
    bucket = bus.subjects.background_tasks_bucket
    store = RecordStore(await bus.kv(bucket), BackgroundTask)
    pattern = f"{safe_token(thread_id)}.*"
    records = [
        record for key in await keys_matching(bus.js, bucket, pattern) if (record := await store.get(key))
    ]
    await drop_keys(bus.js, bucket, pattern)
    for record in records:
        stop = SubagentCancel(
            parent_run_id=record.parent_run_id, task_id=record.task_id, reason="its thread was deleted"
        )
        await bus.publish_core(bus.subjects.subagent_cancel(record.parent_run_id), stop)
