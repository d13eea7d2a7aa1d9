"""Stopping background tasks (`agents.subagents.background`): a deleted thread's (shared by the
threads service, which deletes threads, and the subagent executor, which runs the tasks), and a
background command where a sandbox broker runs it (`agents.subagents.background_commands`). No
LangChain here."""

from __future__ import annotations

import uuid

from bus import Bus
from bus.messages import BackgroundTask, JobControl, SubagentCancel
from bus.records import RecordStore, drop_keys, keys_matching
from bus.subjects import safe_token

__all__ = ["command_job_id", "kill_command", "stop_thread_tasks"]

_JOB_NAMESPACE = uuid.UUID("0e6f2a49-7c1b-4b8e-9a57-2d4c8f1e3b60")


def command_job_id(parent_run_id: str, task_id: str) -> str:
    """A background command's name at the sandbox brokers: one per task, a safe subject token."""
    return uuid.uuid5(_JOB_NAMESPACE, f"{parent_run_id}:{task_id}").hex


async def kill_command(bus: Bus, parent_run_id: str, task_id: str) -> None:
    """Ask whichever broker runs the command to kill it (`<prefix>.sandbox.job.<job id>`; nothing
    happens where none does)."""
    subject = bus.subjects.sandbox(f"job.{command_job_id(parent_run_id, task_id)}")
    await bus.publish_core(subject, JobControl(action="kill"))


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
        if record.kind == "command":
            await kill_command(bus, record.parent_run_id, record.task_id)
