"""A run's history after it ended, from its journal (`bus.journal`), in DeerFlow's shapes.

`GET .../runs/{run}/messages` (its messages, paged by `seq`), `.../events` (every row, filtered
by type or subagent task: how DeerFlow's UI rebuilds task cards after a reload) and
`.../workspace-changes` (the files its tools wrote). The journal is written by the runner
that ends the run and lasts as long as the thread, unlike the live event log. A run that has
not ended yet (or ended before journals were kept) has none: empty answers, as for a run that
did nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from bus.journal import read_journal
from gateway.deps import GW, Gateway, Me
from gateway.schemas import errors

router = APIRouter()

EMPTY_SUMMARY = {
    "created": 0,
    "modified": 0,
    "deleted": 0,
    "symlink_created": 0,
    "additions": 0,
    "deletions": 0,
    "truncated": False,
}


async def journal_rows(gw: Gateway, me: str, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The caller's run's journal rows (404 for another user's run or thread)."""
    record = await gw.own_run(thread_id, run_id, me)
    journal = await read_journal(await gw.bus.files(), record.user_id, thread_id, run_id)
    return journal.events if journal else []


@router.get("/threads/{thread_id}/runs/{run_id}/messages", responses=errors(404))
async def run_messages(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    limit: int = Query(50, ge=1, le=200),
    before_seq: int | None = Query(None, ge=1),
    after_seq: int | None = Query(None, ge=1),
) -> dict[str, Any]:
    """The run's messages (user input, answers, tool results) as rows: `{data, has_more}`, oldest
    first, between `after_seq` and `before_seq`; with `after_seq` the page starts there (forwards),
    else it ends at `before_seq` or the newest (backwards)."""
    rows = [
        r
        for r in await journal_rows(gw, me, thread_id, run_id)
        if r.get("category") == "message"
        and (after_seq is None or r["seq"] > after_seq)
        and (before_seq is None or r["seq"] < before_seq)
    ]
    page = rows[:limit] if after_seq is not None else rows[-limit:]
    return {"data": page, "has_more": len(rows) > limit}


@router.get("/threads/{thread_id}/runs/{run_id}/events", responses=errors(404))
async def run_events(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    event_types: str | None = Query(None, description="Comma-separated event types to keep."),
    task_id: str | None = Query(None, description="Only this subagent task's rows."),
    limit: int = Query(500, ge=1, le=2000),
    after_seq: int | None = Query(None, ge=1),
) -> list[dict[str, Any]]:
    """Every row of the run's journal, oldest first (run start and end, messages, subagent cards
    and their steps, workspace changes)."""
    rows = await journal_rows(gw, me, thread_id, run_id)
    types = {t.strip() for t in event_types.split(",") if t.strip()} if event_types else None
    kept = [
        row
        for row in rows
        if (types is None or row.get("event_type") in types)
        and (
            task_id is None
            or (isinstance(row.get("content"), dict) and row["content"].get("task_id") == task_id)
        )
        and (after_seq is None or row["seq"] > after_seq)
    ]
    return kept[:limit]


@router.get("/threads/{thread_id}/runs/{run_id}/workspace-changes", responses=errors(404))
async def workspace_changes(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    include_files: bool = Query(True),
    include_diff: bool = Query(True),
) -> dict[str, Any]:
    """The files the run's tools wrote (`available: false` when it wrote none, or has no journal)."""
    rows = await journal_rows(gw, me, thread_id, run_id)
    found = [r for r in rows if r.get("event_type") == "workspace_changes"]
    if not found:
        return {"available": False, "version": 1, "summary": dict(EMPTY_SUMMARY), "files": [], "limits": {}}
    answer = dict(found[-1]["metadata"].get("workspace_changes") or {})
    answer["available"] = True
    answer.setdefault("summary", dict(EMPTY_SUMMARY))
    files = list(answer.get("files") or [])
    if not include_files:
        files = []
    elif not include_diff:
        files = [{**f, "diff": ""} for f in files]
    answer["files"] = files
    return answer
