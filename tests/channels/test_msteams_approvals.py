"""Approvals on Teams: the request comes with Approve and Deny buttons (an Adaptive Card under the
answer); pressing one answers it."""

from __future__ import annotations

from typing import Any

import pytest

from config import AppConfig
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.openai_server import FakeOpenAI, echo_and_answer

pytestmark = pytest.mark.usefixtures("bash_needs_approval")


def card_of(message: dict[str, Any]) -> dict[str, Any] | None:
    cards = [a for a in message.get("attachments") or [] if a["contentType"].endswith("card.adaptive")]
    return cards[0]["content"] if cards else None


async def test_a_bash_call_approved_with_the_cards_button_runs(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(*echo_and_answer("from-teams", "Done: from-teams."))
    await teams.say("run it")
    await teams.wait(lambda: any(card_of(m) for m in teams.bot_messages()), 30)
    (asking,) = [m for m in teams.bot_messages() if card_of(m)]
    card = card_of(asking)
    assert card is not None
    approve, deny = card["actions"]
    assert (approve["type"], approve["title"]) == ("Action.Submit", "Approve bash")
    assert deny["data"]["antler_command"].startswith("/deny ")
    pressed = await teams.press(approve, asking["id"])
    assert pressed.status_code == 200
    await teams.wait(lambda: any(m["text"] == "Done: from-teams." for m in teams.bot_messages()), 30)
    tool_results = [m for r in fake_model.agent_requests for m in r["messages"] if m["role"] == "tool"]
    assert any("from-teams" in str(m["content"]) for m in tool_results), "the approved call ran"
