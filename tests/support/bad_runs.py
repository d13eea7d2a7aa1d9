"""Malformed runs, as a LangGraph SDK client or a hand-written curl could send them.

Each case is a run body (the fields of `POST /threads/{id}/runs`, which are also a RunRequest's)
and the field its refusal must name. The gateway must refuse every one with a 4xx naming that
field; a RunRequest published on the bus with the same fields must end as a failed run whose
`error` event names it. Every case is sent to a thread that already holds a finished turn (the
"nothing interrupted" and "nothing to act on" cases are refused for what they ask, not for an
empty thread); `EMPTY_THREAD` cases to a thread with no messages yet.
"""

from __future__ import annotations

from typing import Any

import pytest

HI = {"messages": [{"role": "user", "content": "Hello there"}]}


def case(body: dict[str, Any], field: str, id: str) -> Any:
    return pytest.param(body, field, id=id)


MALFORMED: list[Any] = [
    # command: not one, nothing to do, keys LangGraph does not have
    case({"command": "resume"}, "command", "command-a-string"),
    case({"command": [{"goto": "model"}]}, "command", "command-a-list"),
    case({"command": {}}, "command", "command-empty"),
    case({"command": {"goto": None, "update": None, "resume": None}}, "command", "command-all-null"),
    case({"command": {"goto": [], "update": {}}}, "command", "command-empty-goto-and-update"),
    case({"command": {"resum": 1}}, "command.resum", "command-unknown-key"),
    # goto: nodes the lead agent does not have, and shapes that are no node
    case({"command": {"goto": "nowhere"}}, "command.goto", "goto-unknown-node"),
    case({"command": {"goto": "__start__"}}, "command.goto", "goto-start"),
    case({"command": {"goto": "__end__"}}, "command.goto", "goto-end"),
    case({"command": {"goto": 5}}, "command.goto", "goto-a-number"),
    case({"command": {"goto": {"input": HI}}}, "command.goto", "goto-send-without-node"),
    case({"command": {"goto": {"node": "", "input": HI}}}, "command.goto", "goto-send-empty-node"),
    case({"command": {"goto": {"node": "nowhere", "input": HI}}}, "command.goto", "goto-send-unknown-node"),
    case({"command": {"goto": {"node": "model", "input": 5}}}, "command.goto", "goto-send-arg-a-number"),
    case({"command": {"goto": {"node": "model", "input": None}}}, "command.goto", "goto-send-arg-null"),
    case(
        {"command": {"goto": {"node": "model", "input": {"mesages": []}}}},
        "command.goto",
        "goto-send-arg-unknown-key",
    ),
    case(
        {"command": {"goto": {"node": "model", "input": {"messages": [{"content": "hi"}]}}}},
        "command.goto",
        "goto-send-arg-not-messages",
    ),
    case({"command": {"goto": ["model", "nowhere"]}}, "command.goto", "goto-list-with-unknown-node"),
    case({"command": {"goto": ["model", 5]}}, "command.goto", "goto-list-with-a-number"),
    case(
        {"command": {"goto": ["model", {"node": "model"}, {}]}}, "command.goto", "goto-list-with-empty-send"
    ),
    case({"command": {"goto": "model", "extra": 1}}, "command.extra", "goto-with-unknown-key"),
    # resume: nothing on the thread is waiting for an answer
    case({"command": {"resume": "yes"}}, "command.resume", "resume-nothing-interrupted"),
    case(
        {"command": {"resume": {"some-interrupt": "yes"}}}, "command.resume", "resume-map-nothing-interrupted"
    ),
    # update: not state values, or values the state cannot hold
    case({"command": {"update": "hello"}}, "command.update", "update-a-string"),
    case({"command": {"update": 5}}, "command.update", "update-a-number"),
    case({"command": {"update": [["title"]]}}, "command.update", "update-pairs-not-pairs"),
    case({"command": {"update": {"nope": 1}}}, "command.update.nope", "update-unknown-channel"),
    case({"command": {"update": [["nope", 1]]}}, "command.update.nope", "update-pairs-unknown-channel"),
    case({"command": {"update": {"title": 5}}}, "command.update.title", "update-title-a-number"),
    case(
        {"command": {"update": {"artifacts": "a.md"}}},
        "command.update.artifacts",
        "update-artifacts-a-string",
    ),
    case(
        {"command": {"update": {"messages": [{"content": "hi"}]}}},
        "command.update.messages",
        "update-messages-not-messages",
    ),
    # input: not an object, messages that are not messages, keys the state does not have
    case({"input": "hello"}, "input", "input-a-string"),
    case({"input": [{"role": "user", "content": "hi"}]}, "input", "input-a-list"),
    case({"input": 5}, "input", "input-a-number"),
    case({"input": {"messages": "hello"}}, "input.messages", "input-messages-a-string"),
    case(
        {"input": {"messages": {"role": "user", "content": "hi"}}},
        "input.messages",
        "input-messages-an-object",
    ),
    case({"input": {"messages": [5]}}, "input.messages", "input-message-a-number"),
    case({"input": {"messages": [{"content": "hi"}]}}, "input.messages", "input-message-without-role"),
    case({"input": {"messages": [{"role": "user"}]}}, "input.messages", "input-message-without-content"),
    case(
        {"input": {"messages": [{"role": "robot", "content": "hi"}]}},
        "input.messages",
        "input-message-bad-role",
    ),
    case(
        {"input": {"messages": [{"role": "user", "content": 5}]}}, "input.messages", "input-content-a-number"
    ),
    case(
        {"input": {"messages": [{"role": "user", "content": {"text": "hi"}}]}},
        "input.messages",
        "input-content-an-object",
    ),
    case(
        {"input": {"messages": [{"role": "user", "content": "hi"}, {"type": "human", "content": [5]}]}},
        "input.messages",
        "input-content-list-of-numbers",
    ),
    case({"input": {"mesages": HI["messages"]}}, "input.mesages", "input-unknown-key"),
    case({"input": {**HI, "title": 5}}, "input.title", "input-title-a-number"),
    # both, or assistants and nodes that do not exist
    case({"input": HI, "command": {"goto": "model"}}, "command", "input-and-command"),
    case({"input": HI, "interrupt_before": ["nowhere"]}, "interrupt_before", "interrupt-before-unknown-node"),
    case(
        {"input": HI, "interrupt_after": ["model", "nowhere"]},
        "interrupt_after",
        "interrupt-after-unknown-node",
    ),
    case({"input": HI, "interrupt_before": "model"}, "interrupt_before", "interrupt-before-a-string"),
    case({"input": HI, "checkpoint_id": "no-such-checkpoint"}, "checkpoint_id", "unknown-checkpoint"),
]

# Runs on a thread that has not run yet: nothing to answer, or a command with nothing to steer.
EMPTY_THREAD: list[Any] = [
    case({}, "input", "neither-input-nor-command"),
    case({"input": None}, "input", "input-null"),
    case({"input": {}}, "input", "input-empty"),
    case({"input": {"messages": []}}, "input.messages", "input-no-messages"),
    case({"input": {"title": "a title"}}, "input", "input-only-a-title"),
    case({"command": {"goto": "model"}}, "command", "goto-model-with-nothing-to-answer"),
    # LangGraph would take these as the graph's input too: the update twice, the model beside the Send
    case({"command": {"update": HI, "goto": "model"}}, "command", "command-before-the-first-run"),
    case({"command": {"goto": {"node": "model", "input": HI}}}, "command", "send-before-the-first-run"),
    case({"command": {"resume": "yes"}}, "command.resume", "resume-on-a-new-thread"),
]

# Fields only the gateway's API has (a RunRequest carries the checkpoint's id alone).
GATEWAY_ONLY: list[Any] = [
    case(
        {"input": HI, "checkpoint": {"checkpoint_id": 5}},
        "checkpoint.checkpoint_id",
        "checkpoint-id-a-number",
    ),
    case({"input": HI, "checkpoint": "latest"}, "checkpoint", "checkpoint-a-string"),
]

UNKNOWN_ASSISTANT = case({"assistant_id": "no-such-agent", "input": HI}, "assistant_id", "unknown-assistant")
