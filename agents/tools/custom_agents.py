"""The agent's tools for custom agents: `setup_agent` (a bootstrap run creates one from the
conversation) and `update_agent` (a custom agent refines its own soul and settings).

Both are compiled into every lead agent; RunContext offers `setup_agent` only to a bootstrap
run (`is_bootstrap`, with the new agent's `agent_name`) and `update_agent` only to a run of a
custom agent. They write through `AgentStore`, as the gateway's `/api/agents` does.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from agents.tools.decorator import tool
from bus import Bus
from bus.agent_store import AgentNameInvalid, AgentNotFound, AgentStore, check_fields
from config import AppConfig

# Tools in these groups exist here; a custom agent's `tool_groups` chooses among them.
TOOL_GROUPS = ("bash", "file:read", "file:write", "web", "mcp")


def make_agent_tools(bus: Bus, config: AppConfig) -> list[BaseTool]:
    models = [m.name for m in config.models]

    async def _store() -> AgentStore:
        return await AgentStore.open(bus)

    @tool
    async def setup_agent(
        soul: str, description: str, runtime: ToolRuntime[Any, Any], skills: list[str] | None = None
    ) -> str:
        """Create the custom agent this conversation was about, under the name the user chose.

        Args:
            soul: The whole SOUL.md: the agent's personality, purpose, tone and rules.
            description: One line saying what the agent does.
            skills: Skills the agent should use; omit for all enabled skills, [] for none.
        """
        context = runtime.context
        if not soul.strip():
            return "Error: the soul is empty; write the agent's SOUL.md first"
        fields: dict[str, Any] = {"soul": soul, "description": description.strip()}
        if skills is not None:
            fields["skills"] = skills
        try:
            check_fields(fields, models)
            agent = await (await _store()).update(
                context.user_id, context.agent_name or "", fields, create=True
            )
        except (AgentNameInvalid, ValueError) as exc:
            return f"Error: {exc}"
        return f"Agent '{agent.name}' is ready: start a chat with it to use it."

    @tool
    async def update_agent(
        runtime: ToolRuntime[Any, Any],
        soul: str | None = None,
        description: str | None = None,
        skills: list[str] | None = None,
        tool_groups: list[str] | None = None,
        model: str | None = None,
    ) -> str:
        """Change this custom agent's own definition; what you leave out stays as it is.

        Args:
            soul: The whole new SOUL.md (not a patch: start from the current one).
            description: A new one-line description.
            skills: The skills it uses ([] for none).
            tool_groups: The tool groups it may use, of: bash, file:read, file:write, web, mcp.
            model: The model it runs on (a configured model's name).
        """
        context = runtime.context
        given = {"soul": soul, "description": description, "skills": skills, "tool_groups": tool_groups}
        fields = {k: v for k, v in {**given, "model": model}.items() if v is not None}
        if not fields:
            return "Nothing to change: pass the fields to update."
        if soul is not None and not soul.strip():
            return "Error: the soul would be empty; pass the whole new SOUL.md"
        try:
            check_fields(fields, models)
            await (await _store()).update(context.user_id, context.agent_name or "", fields)
        except (AgentNameInvalid, AgentNotFound, ValueError) as exc:
            return f"Error: {exc}"
        return f"Updated {', '.join(sorted(fields))}; it applies from the next message on."

    return [setup_agent, update_agent]


SANDBOX_TOOL_GROUPS = {
    "bash": "bash",
    "ls": "file:read",
    "read_file": "file:read",
    "glob": "file:read",
    "grep": "file:read",
    "view_image": "file:read",
    "list_uploaded_files": "file:read",
    "write_file": "file:write",
    "str_replace": "file:write",
}


def tool_group_map(config: AppConfig, mcp_tools: list[BaseTool]) -> dict[str, str]:
    """Tool name -> its group: the sandbox's, config.yaml `tools[].group`, `mcp` for MCP tools."""
    from agents.tools.browser import BROWSER_TOOLS

    groups = dict(SANDBOX_TOOL_GROUPS) | dict.fromkeys(BROWSER_TOOLS, "web")
    for entry in config.tools:
        if entry.group:
            groups[entry.name] = entry.group
    for found in mcp_tools:
        groups[found.name] = "mcp"
    return groups


def mcp_server_map(mcp_tools: list[BaseTool]) -> dict[str, str]:
    """MCP tool name -> its server (a role may allow or deny `mcp:<server>`)."""
    servers = {t.name: (t.metadata or {}).get("mcp_server") for t in mcp_tools}
    return {name: server for name, server in servers.items() if isinstance(server, str)}
