"""The runner's tools: its own (sandbox, custom agents, schedules), the `task` tool with the
background tasks' tools, and MCP servers' tools, followed as they change (a changed set
recompiles the agents)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

from agents.graph.lead import AgentCache
from agents.subagents import background_commands
from agents.subagents.background import make_background_tools
from agents.subagents.task_tool import make_task_tool
from agents.tools.browser import make_browser_tools
from agents.tools.custom_agents import make_agent_tools, mcp_server_map, tool_group_map
from agents.tools.mcp import McpServers
from agents.tools.sandbox import make_sandbox_tools, make_view_image_tool
from agents.tools.schedules import make_schedule_tools
from agents.tools.uploads import make_upload_tools
from bus import Bus
from config import AppConfig


def own_tools(bus: Bus, config: AppConfig) -> list[BaseTool]:
    """The runner's built-in tools, bound to its bus connection (the task tool aside)."""
    return [
        *make_sandbox_tools(bus, background_commands.starter(bus, config.sandbox)),
        make_view_image_tool(bus),
        *make_agent_tools(bus, config),
        *make_schedule_tools(bus),
        *make_upload_tools(bus),
        *make_browser_tools(bus, config),
    ]


def build_tool_schemas(config: AppConfig) -> None:
    """Build the built-in tools' argument schemas once (`agents.tools.decorator`), bound to no bus:
    `antler.forkserver` does it before forking, so no runner process builds its own."""
    unbound: Any = None
    own_tools(unbound, config)
    make_task_tool(unbound, config)
    make_background_tools(unbound)


class RunnerTools:
    """The tools of one runner process: `own` and `task` (with `list_background_tasks` and
    `cancel_background_task`) bound to its bus connection, and the MCP servers' (`mcp`, started
    and closed by the runner)."""

    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.config = config
        self.own = own_tools(bus, config)
        self.task = [make_task_tool(bus, config), *make_background_tools(bus)]
        reserved = {t.name for t in [*self.own, *self.task]} | {"ask_clarification", "present_files"}
        self.mcp = McpServers(bus, reserved=reserved, role="runner")
        self._mcp_version = 0
        self.groups = tool_group_map(config, [])  # tool groups, MCP servers' included
        self.servers: dict[str, str] = {}  # MCP tools' servers

    async def refresh(self, agents: AgentCache) -> None:
        """MCP tools as configured now: a changed set recompiles the agents (once per change)."""
        version, tools = await self.mcp.current()
        if version != self._mcp_version:
            deferred = self.config.tool_search.enabled
            agents.extra_tools = [*self.own, *([] if deferred else tools)]
            agents.deferred_tools = list(tools) if deferred else []
            agents.clear()
            self.groups = tool_group_map(self.config, list(tools))
            self.servers = mcp_server_map(list(tools))
            self._mcp_version = version
