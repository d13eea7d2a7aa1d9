"""`AppConfig`: every section of config.yaml, with DeerFlow's fields where they apply.

The sections live by topic (infra, models, sandbox, agent, channels) and are re-exported here.
Defaults give a working single-machine system: embedded nats-server, data under
`.antler/`, gateway on 127.0.0.1:2026. config.example.yaml documents each field;
a test keeps the two in step.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from config._env import Section
from config.access import AccessConfig, OIDCProviderConfig, RoleConfig
from config.agent import (
    BUNDLED_SKILLS,
    ContextSize,
    GoalConfig,
    GuardrailsConfig,
    MemoryConfig,
    SkillsConfig,
    SubagentsConfig,
    SubagentTypeConfig,
    SummarizationConfig,
    TitleConfig,
    ToolConfig,
    ToolGroupConfig,
    ToolOutputConfig,
    ToolSearchConfig,
    default_tool_groups,
    default_tools,
)
from config.agentproto import AgentProtocolConfig
from config.approvals import ApprovalRule, ApprovalsConfig
from config.browser import BrowserConfig
from config.channels import (
    ChannelConfig,
    ChannelsConfig,
    DingTalkConfig,
    DiscordConfig,
    FeishuConfig,
    SlackConfig,
    TelegramConfig,
)
from config.egress import EgressConfig, EgressRule
from config.infra import (
    AuthConfig,
    BusConfig,
    EmbeddedNatsConfig,
    GatewayConfig,
    GatewayToken,
    RunnerConfig,
)
from config.models import (
    ModelCallsConfig,
    ModelConfig,
)
from config.observability import ObservabilityConfig
from config.sandbox import (
    DEFAULT_TOOLBOX_PACKAGES,
    SandboxConfig,
    ToolboxConfig,
)

__all__ = [
    "BUNDLED_SKILLS",
    "DEFAULT_TOOLBOX_PACKAGES",
    "AccessConfig",
    "AppConfig",
    "ApprovalRule",
    "ApprovalsConfig",
    "AuthConfig",
    "BusConfig",
    "ChannelConfig",
    "ChannelsConfig",
    "ContextSize",
    "DingTalkConfig",
    "DiscordConfig",
    "EgressConfig",
    "EgressRule",
    "EmbeddedNatsConfig",
    "FeishuConfig",
    "GatewayConfig",
    "GatewayToken",
    "GoalConfig",
    "GuardrailsConfig",
    "MemoryConfig",
    "ModelCallsConfig",
    "ModelConfig",
    "OIDCProviderConfig",
    "RoleConfig",
    "RunnerConfig",
    "SandboxConfig",
    "SkillsConfig",
    "SlackConfig",
    "SubagentTypeConfig",
    "SubagentsConfig",
    "SummarizationConfig",
    "TelegramConfig",
    "TitleConfig",
    "ToolConfig",
    "ToolGroupConfig",
    "ToolOutputConfig",
    "ToolSearchConfig",
    "ToolboxConfig",
]


class AppConfig(Section):
    """The whole of config.yaml."""

    config_version: int = 1
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    bus: BusConfig = Field(default_factory=BusConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    models: list[ModelConfig] = Field(default_factory=list, description="The first one is the default.")
    model_calls: ModelCallsConfig = Field(default_factory=ModelCallsConfig)
    tool_groups: list[ToolGroupConfig] = Field(default_factory=default_tool_groups)
    tools: list[ToolConfig] = Field(
        default_factory=default_tools,
        description="Without this section: the keyless web tools (search, fetch, image search).",
    )
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    egress: EgressConfig = Field(default_factory=EgressConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    title: TitleConfig = Field(default_factory=TitleConfig)
    summarization: SummarizationConfig = Field(default_factory=SummarizationConfig)
    goal: GoalConfig = Field(default_factory=GoalConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    agent_protocol: AgentProtocolConfig = Field(default_factory=AgentProtocolConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    access: AccessConfig = Field(default_factory=AccessConfig)

    @model_validator(mode="after")
    def _mapped_roles_exist(self) -> AppConfig:
        for provider in self.gateway.auth.oidc:
            for group, role in provider.role_map.items():
                if role not in self.access.roles:
                    raise ValueError(
                        f"gateway.auth.oidc {provider.name}: role_map {group!r} -> {role!r}, "
                        f"but access.roles has no {role!r}"
                    )
        return self

    @field_validator("models")
    @classmethod
    def _model_names_unique(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        seen: set[str] = set()
        for model in models:
            if model.name in seen:
                raise ValueError(f"two models are named {model.name!r}; names must be unique")
            seen.add(model.name)
        return models

    def get_model(self, name: str | None = None) -> ModelConfig | None:
        """The model called `name`, or the default (first) one when `name` is None."""
        if name is None:
            return self.models[0] if self.models else None
        return next((m for m in self.models if m.name == name), None)
