"""Per-run data the graph reads at run time (LangGraph runtime context), and per-run options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """What selects (and caches) a compiled lead agent; from `config.configurable` / `context`."""

    model_name: str | None = None
    thinking_enabled: bool = False
    is_plan_mode: bool = False
    subagent_enabled: bool = False
    agent_name: str | None = None

    @classmethod
    def from_run(cls, configurable: dict[str, Any], context: dict[str, Any]) -> RunOptions:
        merged = {**configurable, **context}

        def flag(name: str) -> bool:
            value = merged.get(name, False)
            return value.lower() in ("1", "true", "yes") if isinstance(value, str) else bool(value)

        model = merged.get("model_name") or merged.get("model")
        agent = merged.get("agent_name")
        return cls(
            model_name=str(model) if model else None,
            thinking_enabled=flag("thinking_enabled"),
            is_plan_mode=flag("is_plan_mode"),
            subagent_enabled=flag("subagent_enabled"),
            agent_name=str(agent) if agent else None,
        )


@dataclass(frozen=True)
class RunContext:
    run_id: str
    thread_id: str
    user_id: str = "default"
    agent_name: str | None = None
    system_prompt: str = ""
    model_name: str | None = None
