"""Approvals on DingTalk: the request is an ActionCard with Approve and Deny buttons, each a link
that makes the DingTalk client send its command as the presser's message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from config import AppConfig
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.openai_server import FakeOpenAI, echo_and_answer
from tests.support.adapters import approved_then_denied, the_model_read_the_denial

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("bash_needs_approval")]


def action_cards(dingtalk: FakeDingTalk) -> list[dict[str, Any]]:
    return [body["actionCard"] for _, body in dingtalk.replies if body.get("msgtype") == "actionCard"]


def texts(dingtalk: FakeDingTalk) -> list[str]:
    return [body["markdown"]["text"] for _, body in dingtalk.replies if body.get("msgtype") == "markdown"]


async def test_a_bash_call_is_approved_with_one_button_and_denied_with_the_other(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, dingtalk_stack: AppConfig
) -> None:
    fake_model.script(*approved_then_denied("ding-approved"))
    dingtalk.send_robot_message("run the first")
    await dingtalk.wait(lambda: len(action_cards(dingtalk)) == 1)
    [card] = action_cards(dingtalk)
    assert "/approve ap" in card["text"], "the text fallback stays in the card"
    approve, deny = card["btns"]
    assert approve["title"] == "Approve bash"
    assert approve["actionURL"].startswith("dtmd://dingtalkclient/sendMessage?content=%2Fapprove%20ap")

    dingtalk.press_button(approve["actionURL"])
    await dingtalk.wait(lambda: "Ran it: ding-approved." in texts(dingtalk))
    assert "ding-approved" in fake_model.agent_requests[-1]["messages"][-1]["content"]

    dingtalk.send_robot_message("run the second")
    await dingtalk.wait(lambda: len(action_cards(dingtalk)) == 2)
    _, deny = action_cards(dingtalk)[1]["btns"]
    dingtalk.press_button(deny["actionURL"])
    await dingtalk.wait(lambda: "Not run, as you said." in texts(dingtalk))
    the_model_read_the_denial(fake_model)


async def test_with_the_webhook_expired_the_buttons_come_through_the_robot_api(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, dingtalk_stack: AppConfig
) -> None:
    fake_model.script(*echo_and_answer("late-approved", "Ran it: late-approved.", when="later"))
    dingtalk.send_robot_message("run it later", webhook_expired=True)
    [sent] = await dingtalk.wait_for("/v1.0/robot/oToMessages/batchSend")
    assert sent["msgKey"] == "sampleActionCard2"
    param = json.loads(sent["msgParam"])
    assert (param["actionTitle1"], param["actionTitle2"]) == ("Approve bash", "Deny bash")
    dingtalk.press_button(param["actionURL1"])  # its message brings a fresh session webhook
    await dingtalk.wait(lambda: "Ran it: late-approved." in texts(dingtalk))
