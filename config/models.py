"""Models and how their calls recover and share a cluster-wide budget."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator

from config._env import Section


class ModelConfig(Section):
    """One chat model; keys not listed here are passed to the provider class."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(description="Unique id used in runs (model_name) and chat commands.")
    display_name: str | None = None
    description: str | None = None
    use: str = Field("langchain_openai:ChatOpenAI", description="Provider class as module:Class.")
    model: str | None = Field(None, description="Provider's model id.")
    api_key: str | None = None
    base_url: str | None = None
    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = None
    supports_thinking: bool = False
    supports_reasoning_effort: bool = False
    supports_vision: bool = False
    when_thinking_enabled: dict[str, Any] | None = Field(
        None, description="Provider fields merged in when a run enables thinking."
    )
    thinking: dict[str, Any] | None = Field(None, description="Shortcut for when_thinking_enabled.thinking.")
    when_thinking_disabled: dict[str, Any] | None = Field(
        None, description="Provider fields merged in when a run turns thinking off."
    )
    use_responses_api: bool | None = None
    output_version: str | None = None
    max_concurrent_calls: int | None = Field(
        None,
        ge=1,
        description="Calls of this model in flight at once across the whole cluster (every runner, "
        "subagent executor and memory updater); more wait their turn, in order. null = no limit.",
    )
    requests_per_minute: int | None = Field(
        None, ge=1, description="Calls of this model started per minute across the cluster; null = no limit."
    )
    tokens_per_minute: int | None = Field(
        None,
        ge=1,
        description="Tokens (prompt and answer) of this model per minute across the cluster; a call starts "
        "only while the minute's count is below it. null = no limit.",
    )
    input_price_per_million: float | None = Field(
        None,
        ge=0,
        description="Price of a million prompt tokens (any currency); counts toward budgets' cost.",
    )
    output_price_per_million: float | None = Field(
        None,
        ge=0,
        description="Price of a million answer tokens (the same currency as input_price_per_million).",
    )
    context_window: int | None = Field(
        None,
        gt=0,
        description="Tokens the model takes in (its context window); summarization starts at "
        "summarization.trigger of it. Unset = summarization.default_context_window.",
    )

    @field_validator("use")
    @classmethod
    def _use_is_module_colon_class(cls, value: str) -> str:
        if ":" not in value:
            raise ValueError("must look like 'package.module:ClassName'")
        return value


class ModelCallsConfig(Section):
    """How every model call recovers from a provider's transient failures (see llm/retry.py)."""

    max_attempts: int = Field(
        5,
        ge=1,
        description="Tries of one model call on a rate limit (429), a 5xx, a timeout or a dropped "
        "connection, the first included; then the run ends with a readable error.",
    )
    initial_delay_seconds: float = Field(
        1.0, ge=0, description="Wait before the second try; doubles each time."
    )
    max_delay_seconds: float = Field(
        60.0, ge=0, description="Longest wait between tries, a provider's Retry-After included."
    )
    lease_seconds: int = Field(
        15,
        ge=1,
        description="A process holding a model slot (max_concurrent_calls) renews it this often (a third of "
        "it); a process that died gives its slots back after this long.",
    )
