"""A run's LangGraph `Command` as clients write it (the LangGraph SDK's `Command` and `Send`), and
which agent a run may name.

The shape is checked here, where the gateway's API and the runner's consumer meet, so a command
that is no command is refused whichever way it came, naming the field. Whether its nodes and
state keys exist, and whether anything waits for its `resume`, depends on the agent's graph and
the thread: the runner checks that (`agents.graph.run_check`).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

LEAD_AGENT = "lead_agent"
# LangGraph's server names a graph's default assistant uuid5(this namespace, graph id); clients
# use either name.
_ASSISTANT_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")
ASSISTANT_IDS = (LEAD_AGENT, str(uuid.uuid5(_ASSISTANT_NAMESPACE, LEAD_AGENT)))

SEND_SHAPE = '{"node": <a node>, "input": {<its state>}}'


def is_known_assistant(assistant_id: str) -> bool:
    return assistant_id in ASSISTANT_IDS


def unknown_assistant(assistant_id: str) -> str:
    """What is wrong with an `assistant_id` no agent has (the field's name not included)."""
    return f"no assistant {assistant_id!r} (there is one: {LEAD_AGENT})"


def check_assistant_id(value: str) -> str:
    """A run's `assistant_id` validator."""
    if not is_known_assistant(value):
        raise PydanticCustomError("unknown_assistant", "{problem}", {"problem": unknown_assistant(value)})
    return value


class SendTo(BaseModel):
    """LangGraph's `Send` as the SDK writes it: run `node` with `input` as its own state."""

    model_config = ConfigDict(extra="forbid")

    node: NodeName
    input: dict[str, Any] | None = None


NodeName = Annotated[StrictStr, Field(min_length=1)]
Goto = NodeName | SendTo
_ONE_GOTO: TypeAdapter[Goto] = TypeAdapter(Goto)


def shown(value: Any, limit: int = 80) -> str:
    """A value as its sender wrote it (JSON), cut short for an error message."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _send_problem(entry: dict[str, Any]) -> str:
    """What is wrong with a dict meant as a Send."""
    extra = sorted(set(entry) - {"node", "input"})
    if extra:
        return f'a Send has "node" and "input", not {shown(extra[0])}'
    node = entry.get("node")
    if not isinstance(node, str) or not node:
        return f'a Send\'s "node" is the name of the node to run, not {shown(node)}'
    return f'a Send\'s "input" is the state the node runs on, an object, not {shown(entry.get("input"))}'


def _goto_problem(value: Any) -> str:
    """Why `value` is no goto, said for the first entry that is not one."""
    entries = value if isinstance(value, list) else [value]
    for index, entry in enumerate(entries):
        try:
            _ONE_GOTO.validate_python(entry)
        except ValidationError:
            which = f"entry {index}: " if isinstance(value, list) else ""
            if isinstance(entry, dict):
                return which + _send_problem(entry)
            return (
                f"{which}{shown(entry)} is neither a node's name nor a Send ({SEND_SHAPE}); "
                "give one of those or a list of them"
            )
    return f"a node's name, a Send ({SEND_SHAPE}) or a list of them, not {shown(value)}"


class RunCommand(BaseModel):
    """LangGraph's `Command` for a run: `resume` an interrupt, `update` the state, `goto` nodes."""

    model_config = ConfigDict(extra="forbid")

    update: dict[str, Any] | list[tuple[str, Any]] | None = Field(
        None, description="State values: an object, or a list of [key, value] pairs."
    )
    resume: Any = Field(None, description="The answer for the interrupted run waiting on the thread.")
    goto: Goto | list[Goto] | None = Field(
        None, description=f"A node to run next, a Send ({SEND_SHAPE}), or a list of them."
    )

    @field_validator("goto", mode="wrap")
    @classmethod
    def _clear_goto(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("goto", "{problem}", {"problem": _goto_problem(value)}) from None

    @field_validator("update", mode="wrap")
    @classmethod
    def _clear_update(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            problem = f"state values: an object or a list of [key, value] pairs, not {shown(value)}"
            raise PydanticCustomError("update", "{problem}", {"problem": problem}) from None

    @model_validator(mode="after")
    def _does_something(self) -> RunCommand:
        if not self.goto and not self.update and self.resume is None:
            raise PydanticCustomError(
                "empty_command",
                "nothing to do: give `resume` (the answer an interrupted run waits for), `update` "
                "(state values) or `goto` (a node to run)",
            )
        return self


def _clear_interrupt_at(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        problem = f'a list of node names, or "*" for every node; not {shown(value)}'
        raise PydanticCustomError("interrupt_at", "{problem}", {"problem": problem}) from None


# `interrupt_before` / `interrupt_after`: which nodes to stop a run at.
InterruptAt = Annotated[list[StrictStr] | Literal["*"] | None, WrapValidator(_clear_interrupt_at)]


def input_or_command(command: RunCommand | None, info: ValidationInfo) -> RunCommand | None:
    """A run's `command` validator (its model declares `input` first): one of the two, not both."""
    if command is not None and info.data.get("input") is not None:
        raise PydanticCustomError(
            "input_and_command",
            "a run takes input (new messages) or a command (resume, update, goto), not both",
        )
    return command
