"""Goal mode in chats: the `/goal` command, and how a goal's progress reads in a chat.

`/goal <text>` sets the chat's thread goal and sends `<text>` to the agent as
the chat's next message (the goal is judged at that run's end); `/goal` shows
the goal; `/goal clear` (or `reset`, `off`) clears it. The goal itself lives on
the thread record, changed only through the runners' threads service.

While the runner goes on by itself, each run's reply ends as a short status
("goal: continuing (2/8) — next: …"); the last run's reply is the answer,
once, with a line saying the goal was reached or why the loop stopped; a
blocked goal asks the user its question.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from bus import Bus
from bus.messages import InboundMessage, ThreadGoalReply, ThreadGoalRequest, ThreadRecord
from bus.service import ServiceError, call
from channels.router.commands.context import Answer, CommandContext, PassOn

GOAL_NAMESPACE = uuid.UUID("6d1b0f3e-93a4-4b8e-a0f2-3c5e7d9b1a24")
CLEAR_WORDS = frozenset({"clear", "reset", "off"})
STOPPED = {
    "max_continuations": "stopped at its limit of {max} runs by itself",
    "no_progress": "stopped: the last runs made no progress",
    "cancelled": "stopped: cancelled",
    "run_failed": "stopped: it could not be judged",
}


def parse(argument: str) -> tuple[Literal["show", "clear", "set"], str]:
    """What `/goal <argument>` asks for, and the objective when it sets one."""
    text = argument.strip()
    if not text:
        return "show", ""
    if text.lower() in CLEAR_WORDS:
        return "clear", ""
    return "set", text


def goal_id_for(message_dedupe_id: str) -> str:
    """The goal a `/goal` message sets: the same on a redelivery, so it does not restart the loop."""
    return str(uuid.uuid5(GOAL_NAMESPACE, message_dedupe_id))


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    """`/goal <text>` sets the goal and sends `<text>` on as the message; `/goal` shows it, `/goal
    clear` clears it.

    Raises:
        ServiceError: no runner answered (tried again like any bus failure).
    """
    action, _ = parse(argument)
    binding = await ctx.bindings.of(message)
    if action == "clear":
        return await clear(ctx.bus, binding.thread_id, binding.user_id)
    if action == "show":
        return shown(await ctx.threads.get(binding.thread_id))
    goal_id = goal_id_for(message.dedupe_id())
    try:
        await change(ctx.bus, binding.thread_id, binding.user_id, argument, goal_id)
    except ServiceError as exc:
        if exc.code not in ("invalid", "not_found"):
            raise
        return f"Could not set the goal: {exc.message}"
    return PassOn(argument)  # the objective becomes the message


async def change(
    bus: Bus, thread_id: str, user_id: str, objective: str | None, goal_id: str | None = None
) -> ThreadGoalReply:
    """Set (`objective`) or clear the thread's goal through the threads service.

    Raises:
        ServiceError: the runners refused (`not_found`, `invalid`) or none answered.
    """
    request = ThreadGoalRequest(thread_id=thread_id, user_id=user_id, objective=objective, goal_id=goal_id)
    return await call(bus, "threads", "goal", request, ThreadGoalReply, timeout=10)


def shown(thread: ThreadRecord | None) -> str:
    """The reply to a bare `/goal`."""
    goal = thread.goal if thread is not None else None
    if goal is None:
        return "No active goal. Set one with /goal <what you want done>."
    lines = [f"Goal: {goal.objective}"]
    if goal.continuation_count:
        lines.append(f"Runs started by themselves: {goal.continuation_count} of {goal.max_continuations}")
    last = goal.last_evaluation
    if last is not None:
        lines.append(f"Last verdict: {last.verdict}" + (f" ({last.reason})" if last.reason else ""))
    return "\n".join(lines)


async def clear(bus: Bus, thread_id: str, user_id: str) -> str:
    try:
        await change(bus, thread_id, user_id, None)
    except ServiceError as exc:
        if exc.code != "not_found":
            return f"Could not clear the goal: {exc.message}"
    return "Goal cleared."


def reply_for(goal: dict[str, Any], answer: str) -> tuple[str, str]:
    """(kind, text) of a run's final reply when its `end` carries a goal outcome."""
    verdict = goal.get("verdict")
    if verdict == "continue" and goal.get("next_run_id"):
        step = str(goal.get("next_step") or "").strip()
        status = f"goal: continuing ({goal.get('continuation')}/{goal.get('max_continuations')})"
        return "final", status + (f" — next: {step}" if step else "")
    if verdict == "blocked" and goal.get("stopped") == "blocked":
        question = str(goal.get("question") or goal.get("reason") or "").strip()
        return "clarification", question or answer
    if verdict == "done":
        return "final", f"{answer}\n\n(goal reached)"
    stopped = STOPPED.get(str(goal.get("stopped") or ""), "stopped")
    return "final", f"{answer}\n\n(goal {stopped.format(max=goal.get('max_continuations'))})"
