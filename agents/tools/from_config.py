"""Tools from config.yaml `tools[]` (`use: module:variable`), and `tool_factory` for writing one."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.tools import BaseTool, StructuredTool

from agents.errors import ToolConfigError
from agents.loader import load
from config import AppConfig, ToolConfig


def tool_factory(make: Callable[[ToolConfig], BaseTool]) -> Callable[[ToolConfig], BaseTool]:
    """Mark `make(entry) -> BaseTool` as a factory: `config_tools` calls it with the tool's
    config.yaml entry (its extra keys, such as `api_key` or `max_results`, in `entry.model_extra`)
    instead of binding the function itself as a tool."""
    make.__antler_tool_factory__ = True  # type: ignore[attr-defined]  # a mark on the function
    return make


def config_tools(config: AppConfig) -> list[BaseTool]:
    """Tools named in config.yaml `tools[]` (`use: module:variable`): a LangChain tool, a plain
    function (bound as a tool named `name`), or a `tool_factory` (called with the entry).

    Raises:
        ToolConfigError: a tool cannot be imported, built, or is not a tool.
    """
    found: list[BaseTool] = []
    for index, entry in enumerate(config.tools):
        where = f"tools[{index}] ({entry.name})"
        try:
            value = load(entry.use)
        except (ImportError, AttributeError) as exc:
            raise ToolConfigError(f"{where}: cannot import {entry.use!r}: {exc}") from None
        if getattr(value, "__antler_tool_factory__", False):
            try:
                built = value(entry)
            except Exception as exc:  # a key missing or wrong: say which tool
                raise ToolConfigError(f"{where}: {type(exc).__name__}: {exc}") from None
            if not isinstance(built, BaseTool):
                raise ToolConfigError(f"{where}: the factory {entry.use!r} did not return a tool")
            found.append(built)
        elif isinstance(value, BaseTool):
            found.append(value)
        elif callable(value):
            found.append(StructuredTool.from_function(value, name=entry.name))
        else:
            raise ToolConfigError(f"{where}: {entry.use!r} is neither a LangChain tool nor a function")
    return found
