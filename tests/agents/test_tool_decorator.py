"""Tools made again by their factories (every runner, executor and test does) are the tools the model
was shown the first time: same names, descriptions and argument schemas, injected arguments hidden."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool as langchain_tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.subagents.task_tool import make_task_tool
from agents.tools.custom_agents import make_agent_tools
from agents.tools.decorator import tool
from agents.tools.sandbox import make_sandbox_tools, make_view_image_tool
from agents.tools.schedules import make_schedule_tools
from config import AppConfig


def _shown(tools: list[Any]) -> list[dict[str, Any]]:
    return [convert_to_openai_tool(t) for t in tools]


def _all(config: AppConfig) -> list[Any]:
    bus: Any = object()  # the factories only close over it; nothing here calls a tool
    return [
        *make_sandbox_tools(bus),
        make_view_image_tool(bus),
        *make_agent_tools(bus, config),
        *make_schedule_tools(bus),
        make_task_tool(bus, config),
    ]


def test_every_tool_made_again_is_shown_to_the_model_as_the_first_time() -> None:
    config = AppConfig()
    first, again = _all(config), _all(config)
    assert _shown(again) == _shown(first)
    bash = next(t for t in again if t.name == "bash")
    assert "runtime" not in bash.tool_call_schema.model_json_schema()["properties"]
    assert "command" in bash.tool_call_schema.model_json_schema()["required"]


def test_a_factory_whose_defaults_or_name_differ_gets_its_own_schema() -> None:
    def factory(limit: int, name: str = "count") -> Any:
        @tool(name)
        def count(items: list[str], at_most: int = limit) -> str:
            """Count items."""
            return str(min(len(items), at_most))

        return count

    def langchains(limit: int, name: str = "count") -> Any:
        @langchain_tool(name)
        def count(items: list[str], at_most: int = limit) -> str:
            """Count items."""
            return str(min(len(items), at_most))

        return count

    for limit, name in ((3, "count"), (3, "count"), (7, "count"), (7, "tally")):
        ours, theirs = factory(limit, name), langchains(limit, name)
        assert convert_to_openai_tool(ours) == convert_to_openai_tool(theirs)
        assert ours.invoke({"items": ["a"] * 10}) == str(limit)
