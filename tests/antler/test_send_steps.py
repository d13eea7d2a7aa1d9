"""What `antler send` tells on stderr while a chat run works: each tool call and subagent task once,
in the words a person reads (`antler.send_steps`), from run events shaped as runners publish them.
The whole path (a real run, its steps on stderr, the answer alone on stdout) is in
tests/e2e/test_first_hour.py."""

from __future__ import annotations

from typing import Any

from antler.send_steps import RunSteps
from bus.messages import RunEvent


def event(seq: int, name: str, data: Any, attempt: int = 1) -> RunEvent:
    return RunEvent(run_id="r1", thread_id="t1", seq=seq, event=name, data=data, attempt=attempt)


def calling(call_id: str, name: str, **args: Any) -> list[Any]:
    """A `messages` event's data: the model's finished message calling one tool."""
    call = {"id": call_id, "name": name, "args": args}
    return [{"type": "ai", "id": f"m-{call_id}", "content": "", "tool_calls": [call]}, {}]


def failed(call_id: str, why: str) -> list[Any]:
    return [{"type": "tool", "tool_call_id": call_id, "status": "error", "content": why}, {}]


def task(kind: str, task_id: str, description: str) -> dict[str, Any]:
    return {"type": kind, "task_id": task_id, "description": description}


def test_a_runs_tool_calls_and_subagent_tasks_are_told_once_each_in_a_line() -> None:
    steps = RunSteps()
    run = [
        event(1, "messages", calling("c1", "web_search", query="deer  antlers\n")),
        event(2, "messages", failed("c1", "429")),
        event(3, "messages", calling("c2", "task", description="Read the paper")),
        event(4, "custom", task("task_started", "c2", "Read the paper")),
        event(5, "custom", {"type": "task_running", "task_id": "c2", "message": "reading"}),
        event(6, "custom", task("task_completed", "c2", "Read the paper")),
        event(7, "messages", calling("c3", "ask_clarification", question="Which one?")),
    ]
    told = [line for e in run for line in steps.take(e)]
    assert told == [
        "· web_search: deer antlers",
        "· web_search: deer antlers  (failed: 429)",
        "· subtask: Read the paper",
        "· subtask done: Read the paper",
    ]
    # A run resumed after its runner died sends its events again: nothing is told twice.
    assert [line for e in run for line in steps.take(event(e.seq, e.event, e.data, attempt=2))] == []


def test_a_long_command_is_cut_to_one_short_line() -> None:
    command = "python3 - <<'EOF'\n" + "print('x')\n" * 40 + "EOF"
    (line,) = RunSteps().take(event(1, "messages", calling("c", "bash", command=command)))
    assert "\n" not in line
    assert len(line) <= 90
    assert line.startswith("· bash: python3 - <<'EOF' print('x')")
