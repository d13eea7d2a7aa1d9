"""Envelopes: round trips, clear decode errors, versioning."""

from __future__ import annotations

import pytest

from bus import ENVELOPES, EnvelopeError, decode, encode
from bus.messages import InboundMessage, RunEvent, RunRequest


def test_every_envelope_round_trips_through_json() -> None:
    sample = RunRequest(thread_id="t1", input={"messages": [{"role": "user", "content": "hi"}]})
    again = decode(RunRequest, encode(sample))
    assert again == sample
    assert again.v == 1
    assert again.multitask_strategy == "enqueue"


def test_a_script_can_send_the_minimal_inbound_message() -> None:
    msg = decode(InboundMessage, b'{"channel": "cli", "chat_id": "me", "text": "hello"}')
    assert msg.user_id == "default"
    assert msg.message_id, "a message id is made up when the script gives none"
    assert msg.dedupe_id() == f"cli:me:{msg.message_id}"


def test_unknown_fields_from_newer_producers_are_ignored() -> None:
    msg = decode(InboundMessage, b'{"v": 1, "channel": "cli", "chat_id": "x", "future_field": 1}')
    assert msg.chat_id == "x"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(b"{oops", "not valid JSON", id="json"),
        pytest.param(b'{"run_id": "r", "thread_id": "t", "seq": "x", "event": "values"}', "seq", id="type"),
        pytest.param(
            b'{"v": 9, "run_id": "r", "thread_id": "t", "seq": 1, "event": "end"}', "v:", id="version"
        ),
    ],
)
def test_decode_errors_name_the_envelope_and_the_field(payload: bytes, expected: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        decode(RunEvent, payload)
    assert "invalid RunEvent" in str(info.value)
    assert expected in str(info.value)


def test_the_registry_names_every_envelope_the_architecture_lists() -> None:
    for name in (
        "InboundMessage",
        "OutboundMessage",
        "RunRequest",
        "RunEvent",
        "RunControl",
        "SubagentTask",
        "MemoryUpdate",
        "ExecRequest",
        "ThreadStateRequest",
    ):
        assert name in ENVELOPES
