"""What the web tools share: their config.yaml keys, the error guard, and text caps."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.runnables.config import var_child_runnable_config
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from access.egress import log_refusal
from agents.tools.community.errors import EgressRefused, WebToolError
from bus.messages import EgressPolicy
from config import MissingEnvError, ToolConfig

logger = logging.getLogger(__name__)

S = TypeVar("S", bound="ToolSettings")


class ToolSettings(BaseModel):
    """The extra keys of a web tool's config.yaml entry; each tool adds its own."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    api_key: str | None = Field(None, description="Unset = the provider's usual environment variable.")
    base_url: str | None = Field(None, description="Unset = the provider's public endpoint.")
    timeout_seconds: float = Field(15.0, gt=0)

    def key(self, env_var: str) -> str | None:
        """The API key: `api_key` if set, else the provider's environment variable, read now."""
        return self.api_key or os.environ.get(env_var) or None


def check_settings(entry: ToolConfig, settings_type: type[S]) -> S:
    """The entry's extra keys as `settings_type`, checked when the tool is built.

    `$NAME` values whose variable is not set yet stay as written; they are resolved
    at each call (`call_settings`), so a missing key does not stop the runner.

    Raises:
        pydantic.ValidationError: an unknown key or a wrong value (config_tools names the tool).
    """
    return settings_type.model_validate(entry.model_extra or {})


def call_settings(entry: ToolConfig, settings_type: type[S]) -> S:
    """The entry's extra keys with every `$NAME` resolved, for one call.

    Raises:
        MissingEnvError: a `$NAME` whose variable is still not set.
    """
    return settings_type.model_validate(entry.resolved_extra())


def run_egress() -> EgressPolicy | None:
    """The run's egress policy (`RunContext.egress`, decided by `access.egress`); None outside a run."""
    try:
        from langgraph.runtime import get_runtime

        runtime = get_runtime()
    except (RuntimeError, ImportError):  # not inside a graph run
        return None
    policy = getattr(getattr(runtime, "context", None), "egress", None)
    return policy if isinstance(policy, EgressPolicy) else None


def run_id() -> str:
    """The run a tool call belongs to (the graph's config metadata), or "-" outside a run."""
    metadata = (var_child_runnable_config.get() or {}).get("metadata") or {}
    return str(metadata.get("run_id") or "-")


async def guarded(tool_name: str, work: Callable[[], Awaitable[str]]) -> str:
    """`work()`'s answer, or an `Error: ...` line the model can act on; nothing is raised."""
    try:
        return await work()
    except EgressRefused as exc:  # the line every refused connection gets, with its run
        log_refusal(tool_name, run_id(), exc.host, None, exc.reason)
        return f"Error: {exc}"
    except WebToolError as exc:
        # A refusal names the run that tried it (the address policy's log: issue 54).
        logger.warning("%s (run %s): %s", tool_name, run_id(), exc)
        return f"Error: {exc}"
    except (MissingEnvError, ValidationError) as exc:
        logger.warning("%s is not set up: %s", tool_name, exc)
        return f"Error: {tool_name} is not set up; tell the user: {exc}"
    except Exception as exc:  # the model gets a readable line instead of a failed run
        logger.exception("%s failed", tool_name)
        return f"Error: {tool_name} failed unexpectedly ({type(exc).__name__}: {exc})"


def clip(text: str, limit: int) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def cap(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` characters, with a line saying it was cut and how long it was."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    boundary = max(cut.rfind("\n"), cut.rfind(" "))
    if boundary > max_chars * 3 // 4:
        cut = cut[:boundary]
    return f"{cut.rstrip()}\n\n[... cut: showing the first {len(cut):,} of {len(text):,} characters ...]"


def first(mapping: dict[str, Any], *keys: str) -> str:
    """The first of `keys` with a non-empty string value, stripped, or ''."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""
