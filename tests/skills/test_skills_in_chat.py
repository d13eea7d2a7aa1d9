"""A skill from a chat: a Telegram user types `/ppt_generation ...` and gets the deck as a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config import AppConfig
from sandbox.toolbox import Toolbox
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.skills.artifacts import open_document
from tests.skills.conftest import SKILLS

DECK = "/mnt/user-data/workspace/deck.json"
PPTX = "/mnt/user-data/outputs/launch-plan.pptx"


@pytest.fixture(autouse=True)
def shipped_skills(config_data: dict[str, Any]) -> None:
    config_data["skills"] = {"path": str(SKILLS)}


async def test_the_ppt_generation_command_in_telegram_sends_the_deck_back_as_a_pptx_file(
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    telegram_stack: AppConfig,
    toolbox: Toolbox,
    tmp_path: Path,
) -> None:
    outline = {
        "title": "Launch plan",
        "slides": [
            {"layout": "title", "title": "Launch plan", "subtitle": "Orbit 2.0"},
            {"layout": "bullets", "title": "Ship in May", "bullets": ["Beta in April", "GA on 12 May"]},
        ],
    }
    make_deck = f"python3 /mnt/skills/public/ppt-generation/scripts/make_deck.py {DECK} --out {PPTX}"
    fake_model.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": DECK, "content": json.dumps(outline)})]),
        Reply(tool_calls=[ToolCall("bash", {"command": make_deck})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [PPTX]})]),
        Reply(text="Your two-slide launch plan."),
    )
    # Telegram commands cannot hold '-': the skill's command is /ppt_generation.
    telegram.send_user_message("/ppt_generation a two-slide launch plan for Orbit 2.0")
    documents = await telegram.wait_for("sendDocument")

    assert documents[0]["document_name"] == "launch-plan.pptx"
    system = fake_model.agent_requests[0]["messages"][0]["content"]
    assert '<active_skill name="ppt-generation">' in system, "the command started the skill"
    received = tmp_path / "received.pptx"
    received.write_bytes(documents[0]["document"])
    deck = await open_document(toolbox, received)
    assert [s["title"] for s in deck["slides"]] == ["Launch plan", "Ship in May"]
    assert deck["slides"][1]["text"][1] == "Beta in April\nGA on 12 May"
    texts = [p["text"] for m, p in telegram.calls if m in ("sendMessage", "editMessageText")]
    assert texts[-1] == "Your two-slide launch plan."
