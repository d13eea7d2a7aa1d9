"""Per-run data the graph reads at run time (LangGraph runtime context), and per-run options."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bus.messages import BackgroundReport, ChatOrigin, EgressPolicy


@dataclass(frozen=True)
class RunOptions:
    """What selects (and caches) a compiled lead agent; from `config.configurable` / `context`."""

    model_name: str | None = None
    thinking_enabled: bool = False
    is_plan_mode: bool = False
    subagent_enabled: bool = False
    agent_name: str | None = None
    reasoning_effort: str | None = None
    # A custom agent's model settings (temperature, max_tokens), as sorted pairs: hashable.
    model_settings: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_run(cls, configurable: dict[str, Any], context: dict[str, Any]) -> RunOptions:
        merged = {**configurable, **context}

        def flag(name: str) -> bool:
            value = merged.get(name, False)
            return value.lower() in ("1", "true", "yes") if isinstance(value, str) else bool(value)

        model = merged.get("model_name") or merged.get("model")
        agent = merged.get("agent_name")
        effort = merged.get("reasoning_effort")
        return cls(
            model_name=str(model) if model else None,
            thinking_enabled=flag("thinking_enabled"),
            is_plan_mode=flag("is_plan_mode"),
            subagent_enabled=flag("subagent_enabled"),
            agent_name=str(agent) if agent else None,
            reasoning_effort=str(effort) if effort else None,
        )

    def with_agent(self, agent: Any, configurable: dict[str, Any], context: dict[str, Any]) -> RunOptions:
        """A custom agent's defaults where the run itself chose nothing (run > agent > model)."""
        merged = {**configurable, **context}
        changes: dict[str, Any] = {}
        if self.model_name is None and agent.model:
            changes["model_name"] = agent.model
        if "thinking_enabled" not in merged and agent.thinking_enabled is not None:
            changes["thinking_enabled"] = bool(agent.thinking_enabled)
        if self.reasoning_effort is None and agent.reasoning_effort:
            changes["reasoning_effort"] = agent.reasoning_effort
        if agent.model_settings:
            changes["model_settings"] = tuple(sorted((agent.model_settings or {}).items()))
        return replace(self, **changes) if changes else self


@dataclass(frozen=True)
class RunContext:
    run_id: str
    thread_id: str
    user_id: str = "default"
    agent_name: str | None = None
    system_prompt: str = ""
    model_name: str | None = None
    is_bootstrap: bool = False
    # Which tools the model gets this run (None: all it was compiled with): names, and groups
    # (a tool without a group is always kept by the group rule).
    allowed_tools: frozenset[str] | None = None
    tool_groups: frozenset[str] | None = None
    tool_group_of: dict[str, str] = field(default_factory=dict)
    origin: ChatOrigin | None = None  # the chat a chat's run came from (its scheduled tasks answer there)
    tool_server_of: dict[str, str] = field(default_factory=dict)  # an MCP tool's server
    tool_filter: Any = None  # the person's role (access.runner.tool_filter): (name, group, server) -> offered
    role: str | None = None  # the person's role's name (access.policy), for the approval rules
    # Where the run's network access may go (access.egress): its sandbox commands and web_fetch.
    egress: EgressPolicy | None = None
    # Messages steered into the run while it works (agents.runner.steering), a list the runner fills
    # and the steering middleware empties before each model call.
    steering: list[dict[str, Any]] | None = field(default=None, compare=False)
    # How a task this run starts in the background reports back: the run's own options and origin.
    report: BackgroundReport | None = field(default=None, compare=False)

    def tool_allowed(self, name: str) -> bool:
        if name == "setup_agent" and not self.is_bootstrap:
            return False
        if name == "update_agent" and (not self.agent_name or self.is_bootstrap):
            return False
        if self.allowed_tools is not None and name not in self.allowed_tools:
            return False
        group = self.tool_group_of.get(name)
        if self.tool_filter is not None and not self.tool_filter(name, group, self.tool_server_of.get(name)):
            return False
        return self.tool_groups is None or group is None or group in self.tool_groups
