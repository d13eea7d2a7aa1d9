"""Files the user sent with a message (DeerFlow's UI lists them in `additional_kwargs.files`)."""

from __future__ import annotations

from typing import Any

import pytest

from bus import Bus
from bus.messages import RunRequest
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runner import submit_and_collect

pytestmark = pytest.mark.asyncio


async def test_files_sent_with_a_message_are_named_to_the_model(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    files: list[dict[str, Any]] = [
        {"filename": "sales\nQ3.csv", "size": 2048, "path": "/mnt/user-data/uploads/sales Q3.csv"},
        {"filename": "passwd", "size": 10, "path": "/etc/passwd"},
        {"filename": "sneaky", "size": 1, "path": "/mnt/user-data/uploads/../../etc/shadow"},
    ]
    message = {"role": "user", "content": "What is in it?", "additional_kwargs": {"files": files}}
    request = RunRequest(thread_id="t-uploads", input={"messages": [message]}, stream_mode=["values"])
    assert (await submit_and_collect(bus, request))[-1].data["status"] == "success"
    prompt = next(m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "system")
    assert "<current_uploads>" in prompt
    assert "- sales Q3.csv (/mnt/user-data/uploads/sales Q3.csv, 2.0 KB)" in prompt
    assert "/etc/passwd" not in prompt, "only files under the uploads directory"
    assert "shadow" not in prompt

    plain = RunRequest(
        thread_id="t-uploads",
        input={"messages": [{"role": "user", "content": "and now?"}]},
        stream_mode=["values"],
    )
    await submit_and_collect(bus, plain)
    later = next(m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "system")
    assert "<current_uploads>" not in later, "only the message they came with"
