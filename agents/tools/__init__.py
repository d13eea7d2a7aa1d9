"""The agent's tools: built-in, from config, the sandbox's, MCP servers', custom agents', schedules',
the web's (`community/`), and what they share.

- `builtin`: `ask_clarification` and `present_files`; `from_config`: `tools[]` entries
  (`tool_factory` marks a factory of your own); `decorator`: `@tool` for tools made in a factory.
- `sandbox`: bash and the file tools, requests to the sandbox broker; `thread_files`: the
  thread's files as the middlewares need them.
- `mcp` (with `mcp_stderr`): MCP servers' sessions and tools per process; `tool_search`:
  deferred tools.
- `custom_agents`: `setup_agent`, `update_agent`; `schedules`: scheduled tasks in words.
- `uploads` (with `file_outline`): the thread's uploads and their outlines; `browser`: the
  browser component's tools.
- `community/`: web search, fetch and image search as config tool factories.
"""

from agents.tools.builtin import ask_clarification, present_files
from agents.tools.from_config import config_tools, tool_factory

__all__ = ["ask_clarification", "config_tools", "present_files", "tool_factory"]
