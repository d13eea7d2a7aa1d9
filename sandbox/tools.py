"""Temporary: agents/runner.py still imports the agent's sandbox tools from here (issue #11).

The tools live in `agents.sandbox_tools`; delete this module once runner.py imports them from there.
Nothing in the sandbox imports it, so `antler run sandbox` does not load LangChain.
"""

from agents.sandbox_tools import make_sandbox_tools, make_view_image_tool

__all__ = ["make_sandbox_tools", "make_view_image_tool"]
