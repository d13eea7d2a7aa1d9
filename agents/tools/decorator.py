"""LangChain's `@tool`, for tools defined inside a factory: each argument schema is built once.

Our tools close over what a runner holds (its bus connection, its config), so they are defined
inside functions (`make_sandbox_tools(bus)` and the like) and made again whenever a runner, a
subagent executor or a test builds them. LangChain's `@tool` builds the argument schema from the
function's signature with pydantic each time: about 25 ms of CPU a tool, a third of a second for
a runner's set, and most of what building a runner costs. The schema depends only on the
function's code, name, annotations and defaults, so it is kept per process under those and handed
back to `@tool` as `args_schema` (which then skips building it); the tool made is otherwise
LangChain's own, with the same description, injected arguments and schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from langchain_core.tools import BaseTool
from langchain_core.tools import tool as langchain_tool

_schemas: dict[tuple[Any, ...], Any] = {}


def _key(func: Callable[..., Any], name: str | None, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return (
        func.__code__,
        name,
        repr(getattr(func, "__annotations__", None)),
        repr(func.__defaults__),
        repr(func.__kwdefaults__),
        kwargs.get("parse_docstring", False),
    )


@overload
def tool(name_or_func: Callable[..., Any], **kwargs: Any) -> BaseTool: ...


@overload
def tool(name_or_func: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], BaseTool]: ...


def tool(
    name_or_func: str | Callable[..., Any] | None = None, **kwargs: Any
) -> BaseTool | Callable[[Callable[..., Any]], BaseTool]:
    """`@tool`, `@tool("name", description=...)` or `@tool(return_direct=True, ...)`, as LangChain's."""

    def make(func: Callable[..., Any], name: str | None) -> BaseTool:
        if "args_schema" in kwargs or kwargs.get("infer_schema") is False:
            return langchain_tool(*([name] if name else []), **kwargs)(func)
        key = _key(func, name, kwargs)
        schema = _schemas.get(key)
        if schema is not None:
            return langchain_tool(*([name] if name else []), args_schema=schema, **kwargs)(func)
        made: BaseTool = langchain_tool(*([name] if name else []), **kwargs)(func)
        _schemas[key] = made.args_schema
        return made

    if callable(name_or_func):
        return make(name_or_func, None)
    return lambda func: make(func, name_or_func)
