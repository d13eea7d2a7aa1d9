"""Approvals on Feishu: the request's card comes with Approve and Deny buttons; a press
(`card.action.trigger` down the long connection) answers it as the presser."""

from __future__ import annotations

from typing import Any

import pytest

from config import AppConfig
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.adapters import approved_then_denied, the_model_read_the_denial

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("bash_needs_approval")]


def buttons(feishu: FakeFeishu) -> list[dict[str, Any]]:
    """The buttons the bot's cards have shown, each once (a card patched keeps its buttons)."""
    return list({b["value"]["command"]: b for b in feishu.buttons()}.values())


async def test_a_bash_call_is_approved_with_the_cards_button_and_denied_by_another(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    fake_model.script(*approved_then_denied("feishu-approved"))
    feishu.send_message("run the first")
    await feishu.wait(lambda: len(buttons(feishu)) == 2)
    approve, deny = buttons(feishu)
    assert approve["text"]["content"] == "Approve bash"
    assert deny["value"]["command"].startswith("/deny ap")
    assert "/approve ap" in feishu.cards()[-1][1], "the text fallback stays in the card"

    feishu.press_button(approve["value"])
    await feishu.wait(lambda: any("Ran it: feishu-approved." in text for _, text in feishu.cards()))
    assert "feishu-approved" in fake_model.agent_requests[-1]["messages"][-1]["content"]

    feishu.send_message("run the second")
    await feishu.wait(lambda: len(buttons(feishu)) == 4)
    _, deny = buttons(feishu)[2:]
    feishu.press_button(deny["value"])
    await feishu.wait(lambda: any("Not run, as you said." in text for _, text in feishu.cards()))
    the_model_read_the_denial(fake_model)


async def test_a_press_by_someone_else_answers_nothing(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    fake_model.script(Reply(tool_calls=[ToolCall("bash", {"command": "echo not-yours"})], when="run it"))
    feishu.send_message("run it", chat_id="oc_group", chat_type="group", mention_bot=True)
    await feishu.wait(lambda: len(buttons(feishu)) == 2)
    approve, _ = buttons(feishu)
    feishu.press_button(approve["value"], chat_id="oc_group", open_id="ou_mallory")
    # The press is answered as the presser's message (a refusal, as a typed /approve would be).
    await feishu.wait(lambda: any("/approve" not in text for _, text in feishu.cards()))
    assert len(fake_model.agent_requests) == 1, "the call did not run: nothing went back to the model"
