"""The JSON the gateway's REST routes answer with, built in one place for the gateway and for
`antler.Client` (whose methods return the same dicts), so the two cannot drift. No FastAPI here: the
routes wrap these dicts in their response models (`gateway/rest/*`, `gateway/schemas.py`), and the
client's conformance tests parse its answers through those models.
"""

from __future__ import annotations

from typing import Any

from bus.messages import MemoryDocument, RunRecord, RunStatus, ScheduledTask, ThreadGoal, ThreadRecord
from bus.records import RecordStore
from config import AppConfig
from skills import SkillEntry


def model_info(config: AppConfig, name: str) -> dict[str, Any] | None:
    """A model as `GET /api/models/{name}` shows it (display fields only, never a key), or None."""
    model = config.get_model(name)
    if model is None:
        return None
    return {
        "name": model.name,
        "display_name": model.display_name,
        "description": model.description,
        "model": model.__dict__.get("model"),  # as written: a `$ENV` reference is never resolved here
        "supports_thinking": model.supports_thinking,
        "supports_reasoning_effort": model.supports_reasoning_effort,
        "supports_vision": model.supports_vision,
    }


def skill_info(skill: SkillEntry) -> dict[str, Any]:
    """A skill of the published catalog as `GET /api/skills` lists it."""
    return {
        "name": skill.name,
        "description": skill.description,
        "license": skill.license,
        "category": skill.category,
        "enabled": skill.enabled,
        "editable": skill.category == "custom",
        "version": skill.version,
    }


def thread_json(record: ThreadRecord, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A thread in the LangGraph API's `Thread` shape."""
    return {
        "thread_id": record.thread_id,
        "created_at": record.created_at.isoformat() if record.created_at else None,
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
        "metadata": record.metadata,
        "status": record.status,
        "values": values or {},
        "interrupts": {},
    }


def memory_document(doc: MemoryDocument) -> dict[str, Any]:
    """A memory document in DeerFlow's memory.json shape."""
    data = doc.model_dump(
        mode="json", by_alias=True, include={"version", "last_updated", "user", "history", "facts"}
    )
    for fact in data["facts"]:
        fact["source"] = fact.get("source") or "unknown"
    return data


def memory_config(config: AppConfig) -> dict[str, Any]:
    """Memory's settings as `GET /api/memory/config` shows them."""
    return {"mode": "middleware", **config.memory.model_dump()}


def goal_json(goal: ThreadGoal | None) -> dict[str, Any] | None:
    """A thread's goal as DeerFlow's GoalState, or None."""
    return goal.goal_state() if goal is not None else None


_TASK_SHOWN = {
    "id",
    "thread_id",
    "context_mode",
    "title",
    "prompt",
    "schedule_type",
    "schedule_spec",
    "timezone",
    "status",
    "next_run_at",
    "last_run_at",
    "last_run_id",
    "last_thread_id",
    "last_error",
    "run_count",
    "created_at",
    "updated_at",
}


async def scheduled_task(task: ScheduledTask, runs: RecordStore[RunRecord]) -> dict[str, Any]:
    """DeerFlow's ScheduledTask shape (and Antler's `chat`); `running` while its latest run is going."""
    data = task.model_dump(mode="json", include=_TASK_SHOWN)
    data["schedule_spec"] = task.shown_spec()
    origin = task.origin
    data["chat"] = (
        {"channel": origin.channel, "chat_id": origin.chat_id, "topic_id": origin.topic_id}
        if origin
        else None
    )
    if task.status == "enabled" and task.last_run_id:
        run = await runs.get(task.last_run_id)
        if run is not None and run.status in (RunStatus.PENDING, RunStatus.RUNNING):
            data["status"] = "running"
    return data
