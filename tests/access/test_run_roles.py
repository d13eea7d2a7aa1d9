"""Roles where the work happens: the runner offers a person only their role's tools and refuses a model
or custom agent their role lacks, for a run from any way in (here a script's RunRequest on the bus);
a role assigned meanwhile holds from the next run, and every run and refusal is in the audit trail."""

from __future__ import annotations

from typing import Any

import pytest

from access import AuditLog, RoleBook
from bus import Bus
from config import AppConfig
from config.loader import _build
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import ask, running_runner, submit_and_collect


@pytest.fixture
def team_config(config_data: dict[str, Any]) -> AppConfig:
    base = config_data["models"][0]
    data = {
        **config_data,
        "models": [base, {**base, "name": "big", "model": "big-1"}],
        "sandbox": {"provider": "local"},
        "access": {
            "roles": {
                "member": {},
                "intern": {"models": ["fake"], "tools": ["group:web", "ask_clarification"], "agents": []},
            },
            "channel_roles": {"telegram": "intern"},
        },
    }
    return _build(AppConfig, data, "test config")


def tool_names(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_a_role_limits_the_tools_offered_and_refuses_a_forbidden_model(
    bus: Bus, nats_url: str, team_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    roles = await RoleBook.open(bus)
    await roles.assign("ivy", "intern", source="test")
    async with running_runner(nats_url, team_config):
        fake_model.script(Reply(text="hello ivy", when="ivy-1"), Reply(text="hello max", when="max-1"))
        await submit_and_collect(bus, ask("th-ivy", "ivy-1", user_id="ivy"))
        await submit_and_collect(bus, ask("th-max", "max-1", user_id="max"))
        offered = {r["messages"][-1]["content"]: tool_names(r) for r in fake_model.agent_requests}
        assert "bash" in offered["max-1"]  # a member: every tool
        assert "bash" not in offered["ivy-1"]
        assert "write_file" not in offered["ivy-1"]
        assert "ask_clarification" in offered["ivy-1"]

        asked = len(fake_model.agent_requests)
        events = await submit_and_collect(
            bus, ask("th-ivy-2", "big please", user_id="ivy", config={"configurable": {"model_name": "big"}})
        )
        error = next(e.data for e in events if e.event == "error")
        assert "may not use model 'big'" in error["message"]
        assert len(fake_model.agent_requests) == asked  # the model was never called

        # An admin promotes ivy: the next run may use the big model, no restart.
        await roles.assign("ivy", "member", source="admin:ana")
        fake_model.script(Reply(text="big answer", when="big again"))
        events = await submit_and_collect(
            bus, ask("th-ivy-3", "big again", user_id="ivy", config={"configurable": {"model_name": "big"}})
        )
        assert not [e for e in events if e.event == "error"]

    trail = await AuditLog(bus).read(user_id="ivy")
    assert [r.action for r in trail] == ["run_started", "run_refused", "run_started"]
    assert trail[1].detail["model"] == "big"
    assert trail[0].detail["role"] == "intern"


async def test_unlinked_chat_users_get_their_platforms_role(
    bus: Bus, nats_url: str, team_config: AppConfig, fake_model: FakeOpenAI
) -> None:
    async with running_runner(nats_url, team_config):
        fake_model.script(Reply(text="hi", when="from telegram"))
        await submit_and_collect(bus, ask("th-tg", "from telegram", user_id="telegram:42"))
    assert "bash" not in tool_names(fake_model.agent_requests[-1])
