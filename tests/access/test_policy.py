"""What a role allows: names, `*`, tool groups, MCP servers, and `!` denials that win over any allowance."""

from __future__ import annotations

import pytest

from access.policy import Permissions
from config import RoleConfig


def role(**lists: list[str]) -> Permissions:
    return Permissions("tester", RoleConfig.model_validate(lists))


@pytest.mark.parametrize(
    ("tools", "call", "allowed"),
    [
        pytest.param(["*"], ("bash", "bash", None), True, id="everything"),
        pytest.param(["mcp:notes"], ("add_numbers", "mcp", "notes"), True, id="one-mcp-server"),
        pytest.param(["mcp:notes"], ("forecast", "mcp", "weather"), False, id="another-mcp-server"),
        pytest.param(["*", "!mcp:notes"], ("add_numbers", "mcp", "notes"), False, id="all-but-one-server"),
        pytest.param(["*", "!mcp:notes"], ("forecast", "mcp", "weather"), True, id="the-other-server"),
        pytest.param(
            ["group:mcp", "!add_numbers"], ("add_numbers", "mcp", "notes"), False, id="deny-by-name"
        ),
        pytest.param(["group:web"], ("web_search", "web", None), True, id="a-group"),
        pytest.param(["*", "!group:bash"], ("bash", "bash", None), False, id="deny-a-group"),
    ],
)
def test_a_roles_tool_rules(tools: list[str], call: tuple[str, str, str | None], allowed: bool) -> None:
    assert role(tools=tools).tool(*call) is allowed


def test_every_tool_only_when_nothing_is_denied() -> None:
    assert role(tools=["*"]).every_tool
    assert not role(tools=["*", "!bash"]).every_tool
    assert not role(tools=["bash"]).every_tool


def test_models_skills_and_agents_take_denials_too_and_a_refusal_says_what_is_left() -> None:
    most = role(models=["*", "!big"], skills=["*", "!deploy"], agents=["*", "!ops"])
    assert most.model("fake")
    assert not most.model("big")
    assert (most.skill("notes"), most.skill("deploy")) == (True, False)
    assert (most.agent("helper"), most.agent("ops")) == (True, False)
    assert most.refusal_for_model("fake") is None
    assert most.refusal_for_model("big") == (
        "model: your role 'tester' may not use model 'big' (it may use: *; not big)"
    )
    assert role(models=["fake"]).refusal_for_model("big") == (
        "model: your role 'tester' may not use model 'big' (it may use: fake)"
    )
