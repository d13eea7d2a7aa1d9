"""Whether a run request can run on the lead agent's graph and its thread, said before it starts.

LangGraph quietly passes over much of what does not fit: a `goto` to a node the graph lacks, a
`resume` with nothing interrupted, update or input keys the state does not have; the run then
ends `success` with an empty turn. Other things it refuses deep inside, with errors that name no
field (`In Command.goto, expected Send/str`), or stores and fails on later (a title that is a
number breaks the thread's record). The runner checks each request here before it starts it, and
the threads service does for the gateway before it accepts one; both against the compiled graph's
own nodes and the state's own schema, each refusal naming the field.

The request's shape (a command that is one, not both input and a command) is its envelope's to
check (`bus.messages.RunRequest`).
"""

from __future__ import annotations

from typing import Any

from langgraph.constants import START

from agents.graph.state_update import InvalidStateUpdate, check_values
from bus.messages import RunRequest, SendTo


class InvalidRun(ValueError):
    """A run that cannot run; the message starts with the field: `command.goto: ...`."""


def targets_of(graph: Any) -> list[str]:
    """The nodes a run may go to or stop at: the graph's own, not its entry."""
    return sorted(name for name in graph.nodes if name != START)


def _no_node(where: str, name: str, nodes: list[str]) -> InvalidRun:
    return InvalidRun(f"{where}: the lead agent has no node {name!r} (it has {', '.join(nodes)})")


def _values(values: Any, where: str) -> bool:
    """Check state values a run brings; whether they bring messages."""
    try:
        check_values(values, where, unknown_keys=False)
    except InvalidStateUpdate as exc:
        raise InvalidRun(str(exc)) from None
    return bool(values.get("messages"))


def _command_brings_messages(request: RunRequest, nodes: list[str]) -> bool:
    command = request.command
    assert command is not None
    brings = False
    if command.update:
        pairs = command.update.items() if isinstance(command.update, dict) else command.update
        for key, value in pairs:
            brings |= _values({key: value}, "command.update")
    targets = command.goto if isinstance(command.goto, list) else [command.goto] if command.goto else []
    for index, target in enumerate(targets):
        where = f"command.goto.{index}" if isinstance(command.goto, list) else "command.goto"
        name = target.node if isinstance(target, SendTo) else target
        if name not in nodes:
            raise _no_node(where, name, nodes)
        if isinstance(target, SendTo):
            if target.input is None:
                raise InvalidRun(
                    f"{where}: a Send to {name!r} needs its input, the state the node runs on "
                    '(such as {"messages": [...]})'
                )
            brings |= _values(target.input, f"{where}.input")
    return brings


async def check_run(request: RunRequest, graph: Any) -> None:
    """Raise unless `graph` (the lead agent compiled for the run, with its checkpointer) can run it.

    The thread's state is read only when the answer depends on it: a command (has the thread
    run, does anything wait for its `resume`?), a `checkpoint_id`, or a run that brings no
    messages (is there a conversation to answer?).

    Raises:
        InvalidRun: naming the first field that does not fit.
    """
    nodes = targets_of(graph)
    for field in ("interrupt_before", "interrupt_after"):
        names = getattr(request, field)
        for name in names if isinstance(names, list) else []:
            if name not in nodes:
                raise _no_node(field, name, nodes)
    command = request.command
    brings_messages = False
    if request.input is not None:
        brings_messages = _values(request.input, "input")
    if command is not None:
        brings_messages = _command_brings_messages(request, nodes)
    resumes = command is not None and command.resume is not None
    if brings_messages and command is None and not request.checkpoint_id:
        return
    configurable = {"thread_id": request.thread_id, "checkpoint_ns": ""}
    if request.checkpoint_id:
        configurable["checkpoint_id"] = request.checkpoint_id
    state = await graph.aget_state({"configurable": configurable})
    thread = f"thread {request.thread_id}"
    if request.checkpoint_id and state.created_at is None:
        raise InvalidRun(f"checkpoint_id: {thread} has no checkpoint {request.checkpoint_id!r}")
    if command is not None and not resumes and state.created_at is None:
        # LangGraph takes a command on a thread with no checkpoint as the graph's input as well:
        # its update is applied twice and its entry runs the model beside any Send.
        raise InvalidRun(
            f"command: {thread} has not run yet, and a command steers a thread that has; "
            'start it with input such as {"messages": [{"role": "user", "content": "..."}]}'
        )
    if resumes:
        if not state.interrupts:
            raise InvalidRun(
                f"command.resume: nothing on {thread} waits for an answer (no run of it was "
                "interrupted); send the answer as a new message instead"
            )
        return
    if brings_messages or (state.values or {}).get("messages"):
        return
    if command is not None:
        raise InvalidRun(f"command: {thread} has no messages yet and the command brings none to act on")
    if request.input is None:
        raise InvalidRun(
            f"input: the run has neither input nor a command, and {thread} has no messages to go on from; "
            'send input such as {"messages": [{"role": "user", "content": "..."}]}'
        )
    raise InvalidRun(f"input.messages: {thread} has no messages yet and the run brings none")
