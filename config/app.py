"""`AppConfig`: every section of config.yaml, with DeerFlow's fields where they apply.

Defaults give a working single-machine system: embedded nats-server, data under
`.antler/`, gateway on 127.0.0.1:2026. config.example.yaml documents each field;
a test keeps the two in step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from config._env import Section

_SUBJECT_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


class EmbeddedNatsConfig(Section):
    host: str = Field("127.0.0.1", description="Interface the embedded nats-server listens on.")
    port: int = Field(0, ge=0, le=65535, description="Client port; 0 picks a free port.")
    max_payload_mb: int = Field(8, ge=1, le=64, description="Largest message the server accepts, in MiB.")
    component_users: bool = Field(
        True,
        description="Each component connects as its own NATS user, allowed only the subjects it needs "
        "(credentials in <data_dir>/nats-users.json); false = one user with every right.",
    )


class BusConfig(Section):
    url: str | None = Field(
        None,
        description="nats:// URL of an existing NATS; several (comma-separated) for a cluster, so a client "
        "reconnects to another server; unset = embedded server.",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=5,
        description="Copies of every stream, KV bucket and the object store: 1 on one server, 3 in a "
        "3-node cluster (one server may die without losing anything).",
    )
    prefix: str = Field("antler", description="First token of every subject; names streams and buckets.")
    data_dir: str = Field(".antler", description="Directory for JetStream, checkpoints and sandboxes.")
    embedded: EmbeddedNatsConfig = Field(default_factory=EmbeddedNatsConfig)
    token: str | None = Field(None, description="Token for an external NATS server.")
    user: str | None = None
    password: str | None = None
    credentials: str | None = Field(None, description="Path of a NATS .creds file.")
    connect_timeout_seconds: float = Field(5.0, gt=0)
    dedupe_window_seconds: float = Field(120.0, gt=0, description="Nats-Msg-Id duplicate window.")
    max_deliver: int = Field(5, ge=1, description="Deliveries before a failing message goes to the DLQ.")
    ack_wait_seconds: float = Field(30.0, gt=0, description="Redelivery delay of an un-acked message.")
    run_events_max_age_hours: float = Field(24.0, gt=0, description="How long run event logs are kept.")
    chat_out_max_age_hours: float = Field(24.0, gt=0)
    dlq_max_age_days: float = Field(30.0, gt=0)
    memory_updates_max_age_hours: float = Field(
        168.0, gt=0, description="Conversations waiting for the memory updater longer than this are dropped."
    )
    memory_updates_max_mb: float = Field(
        256.0, gt=0, description="Room for conversations waiting for the memory updater (oldest go first)."
    )
    subagent_results_ttl_hours: float = Field(
        24.0, gt=0, description="How long finished subagent results are kept for a parent run that resumes."
    )

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_subject_token(cls, value: str) -> str:
        if not _SUBJECT_TOKEN.match(value):
            raise ValueError("must be one subject token: letters, digits, '-' or '_'")
        return value


class RunnerConfig(Section):
    concurrency: int = Field(64, ge=1, description="Runs one runner process works on at once.")
    processes: int = Field(
        0,
        ge=0,
        description="Runner processes `antler up` starts (they share the work); 1 = inside `antler up` "
        "itself; 0 = one per CPU core, at most 4.",
    )
    run_timeout_seconds: float = Field(
        3600.0, gt=0, description="A run longer than this is stopped (timeout)."
    )
    recursion_limit: int = Field(100, ge=1, description="Most graph steps in one run.")
    checkpointer: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="Where conversation checkpoints live: sqlite = a file on this machine; postgres = a "
        "shared database, so runners on several machines resume each other's runs.",
    )
    checkpoint_db: str | None = Field(
        None, description="SQLite file for checkpoints; default <bus.data_dir>/checkpoints.sqlite."
    )
    postgres_url: str | None = Field(
        None, description="postgresql:// URL of the checkpoint database (with checkpointer: postgres)."
    )
    postgres_pool_size: int = Field(
        10, ge=1, description="Most connections one process keeps to the checkpoint database."
    )

    @model_validator(mode="after")
    def _postgres_needs_a_url(self) -> RunnerConfig:
        if self.checkpointer == "postgres" and not self.postgres_url:
            raise ValueError("checkpointer: postgres needs runner.postgres_url (a postgresql:// URL)")
        return self


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


class ToolGroupConfig(Section):
    name: str


class ToolConfig(Section):
    """A tool from config (`use: module:variable`); extra keys configure it."""

    model_config = ConfigDict(extra="allow")

    name: str
    group: str | None = None
    use: str


DEFAULT_TOOLBOX_PACKAGES = [
    "pandas",
    "numpy",
    "matplotlib",
    "openpyxl",
    "python-pptx",
    "python-docx",
    "pypdf",
]


class ToolboxConfig(Section):
    """The Python environment (and the host's Node.js) sandboxed commands get: `sandbox.toolbox`."""

    enabled: bool = Field(True, description="Mount the toolbox into every sandbox (when it is installed).")
    path: str | None = Field(
        None,
        description="Where it is installed; default $ANTLER_TOOLBOX_PATH, else <bus.data_dir>/toolbox.",
    )
    python_packages: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TOOLBOX_PACKAGES),
        description="pip requirements installed into it (`antler sandbox install`, `antler up`).",
    )
    node: bool = Field(True, description="Offer the host's Node.js in the sandbox when it has one.")


class SandboxConfig(Section):
    provider: Literal["auto", "bwrap", "local"] = Field(
        "auto", description="auto = bwrap when installed, else local (not isolated)."
    )
    data_dir: str | None = Field(
        None, description="Per-user, per-thread working copies; default <bus.data_dir>/sandbox."
    )
    allow_network: bool = False
    command_timeout_seconds: float = Field(120.0, gt=0)
    grep_timeout_seconds: float = Field(
        30.0, gt=0, description="The grep tool's deadline: a pattern still matching then is killed."
    )
    max_output_chars: int = Field(20_000, gt=0)
    max_read_chars: int = Field(50_000, gt=0)
    max_write_bytes: int = Field(10 * 1024 * 1024, gt=0)
    cpu_seconds: int = Field(120, gt=0)
    cpu_cores: float = Field(
        1.0, gt=0, description="CPU one command's processes may use together (cgroup v2 hosts only)."
    )
    memory_mb: int = Field(1024, gt=0)
    max_processes: int = Field(256, gt=0)
    max_file_size_mb: int = Field(100, gt=0)
    max_thread_mb: float = Field(
        1024, gt=0, description="Disk one thread's files may take (workspace, outputs, uploads, /tmp)."
    )
    max_commands_per_user: int = Field(
        8, gt=0, description="Commands (and greps) of one user a broker runs at once; more wait."
    )
    max_waiting_per_user: int = Field(
        8, ge=0, description="Commands of one user waiting for a slot; more are refused (busy)."
    )
    toolbox: ToolboxConfig = Field(default_factory=ToolboxConfig)


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


class MemoryConfig(Section):
    enabled: bool = True
    injection_enabled: bool = True
    debounce_seconds: float = Field(30.0, ge=0)
    model_name: str | None = Field(None, description="Model for fact extraction; unset = default model.")
    max_facts: int = Field(100, gt=0)
    fact_confidence_threshold: float = Field(0.7, ge=0, le=1)
    max_injection_tokens: int = Field(2000, gt=0)


class TitleConfig(Section):
    enabled: bool = True
    max_words: int = Field(6, gt=0)
    max_chars: int = Field(60, gt=0)
    model_name: str | None = None
    prompt_template: str | None = Field(None, description="Uses {max_words}, {user_msg}, {assistant_msg}.")


class ContextSize(Section):
    type: Literal["tokens", "messages", "fraction"]
    value: float = Field(gt=0)

    @model_validator(mode="after")
    def _fraction_at_most_one(self) -> ContextSize:
        if self.type == "fraction" and self.value > 1:
            raise ValueError("a fraction must be between 0 and 1")
        return self


class SummarizationConfig(Section):
    """Older messages replaced by a summary when a thread nears the model's context window (on by
    default); what they said is handed to memory first. `/compact` does the same on demand."""

    enabled: bool = True
    model_name: str | None = Field(None, description="Model writing summaries; unset = the run's model.")
    trigger: list[ContextSize] = Field(
        default_factory=lambda: [ContextSize(type="fraction", value=0.8)],
        description="Summarize when any of these is reached (fraction: of the model's context_window).",
    )
    keep: ContextSize = Field(
        default_factory=lambda: ContextSize(type="fraction", value=0.3),
        description="What stays verbatim after summarizing (fraction: of the model's context_window).",
    )
    default_context_window: int = Field(
        128_000, gt=0, description="Context window of a model whose config gives none, in tokens."
    )
    trim_tokens_to_summarize: int | None = Field(4000, description="Cap on what is sent to be summarized.")
    summary_prompt: str | None = None


class GoalConfig(Section):
    """Goal mode: after each run of a thread with a goal, an evaluator model judges it and the runner
    goes on by itself within these limits."""

    max_continuations: int = Field(
        8, ge=0, le=100, description="Runs the runner starts by itself after one message of the user."
    )
    max_no_progress: int = Field(
        2, ge=1, description="Evaluations in a row whose run changed nothing before the loop stops."
    )
    model_name: str | None = Field(None, description="Model of the evaluator; unset = the default model.")
    timeout_seconds: float = Field(60.0, gt=0, description="An evaluation taking longer stops the loop.")


class ToolOutputConfig(Section):
    """Every tool result's budget: a longer one reaches the model cut (head and tail), its whole text
    saved under the thread's outputs (`<outputs>/tool-results/`) with the path in the note."""

    enabled: bool = True
    max_chars: int = Field(20_000, gt=0, description="Longest tool result the model gets whole.")
    head_chars: int = Field(8_000, ge=0, description="Characters kept from the start of a longer one.")
    tail_chars: int = Field(3_000, ge=0, description="Characters kept from its end.")
    tool_overrides: dict[str, int] = Field(
        default_factory=dict, description="max_chars per tool name (e.g. a verbose MCP tool)."
    )
    not_saved: list[str] = Field(
        default_factory=lambda: ["read_file"],
        description="Tools whose long results are cut but not saved again (read_file reads a saved file).",
    )


class ToolSearchConfig(Section):
    enabled: bool = Field(False, description="MCP tools are found with tool_search instead of bound at once.")
    max_results: int = Field(5, gt=0, description="Tools one tool_search call returns.")


class GuardrailsConfig(Section):
    """A check before each tool call (`agents.guardrails`); extra keys configure your own provider."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = False
    use: str = Field("agents.guardrails:AllowlistProvider", description="The provider, as module:Class.")
    allowed_tools: list[str] | None = Field(None, description="Only these may run; null = all not denied.")
    denied_tools: list[str] = Field(default_factory=list)
    denied_commands: list[str] = Field(
        default_factory=list, description="Regular expressions: bash commands matching one are refused."
    )


class SubagentTypeConfig(Section):
    """A subagent type of your own, besides the built-in `general-purpose` and `bash`."""

    description: str = Field(description="When the lead agent should pick it (shown in the task tool).")
    system_prompt: str = Field("", description="Its instructions; the task's prompt follows as the request.")
    tools: list[str] | None = Field(
        None, description="Tool names it may use; null = every lead tool except task, ask_clarification."
    )
    skills: list[str] | None = Field(None, description="Skills listed in its prompt; null = none.")
    model_name: str | None = Field(None, description="null = subagents.model_name, else the parent's model.")
    max_turns: int | None = Field(None, gt=0, description="null = subagents.max_turns.")
    timeout_seconds: float | None = Field(None, gt=0, description="null = subagents.timeout_seconds.")


class SubagentsConfig(Section):
    enabled: bool = True
    max_concurrent: int = Field(3, gt=0, description="task calls run per model turn; more get an error.")
    timeout_seconds: float = Field(900.0, gt=0, description="A task running longer is stopped (timed_out).")
    max_turns: int = Field(30, gt=0, description="Model turns a subagent gets before it must stop.")
    model_name: str | None = Field(None, description="null = the parent run's model.")
    executor_concurrency: int = Field(
        16, gt=0, description="Tasks one executor process runs at once (more wait on the bus)."
    )
    agents: dict[str, SubagentTypeConfig] = Field(
        default_factory=dict, description="Your own subagent types by name."
    )


# The skills that ship with Antler (skills/public) sit beside this package.
BUNDLED_SKILLS = Path(__file__).resolve().parent.parent / "skills"


class SkillsConfig(Section):
    path: str = Field(
        default_factory=lambda: str(BUNDLED_SKILLS),
        description="Host directory whose public/ holds the skills that ship with the code (null: "
        "Antler's own, wherever `antler` is started). Custom skills are in the object store; each "
        "machine unpacks them with these into <bus.data_dir>/skills, which the sandbox mounts.",
    )

    @field_validator("path", mode="before")
    @classmethod
    def _bundled_when_null(cls, value: object) -> object:
        return str(BUNDLED_SKILLS) if value is None else value

    container_path: str = Field("/mnt/skills", description="Where the agent sees them.")


class ChannelConfig(Section):
    enabled: bool = False
    allowed_users: list[str] = Field(default_factory=list, description="Empty = everyone.")
    allowed_chats: list[str] = Field(default_factory=list, description="Empty = every chat.")
    require_mention_in_groups: bool = True


class SlackConfig(ChannelConfig):
    bot_token: str | None = None
    app_token: str | None = None
    base_url: str | None = Field(None, description="Web API base (tests point it at a local fake).")


class TelegramConfig(ChannelConfig):
    bot_token: str | None = None
    base_url: str | None = Field(None, description="Bot API base (tests point it at a local fake).")
    webhook_url: str | None = Field(
        None, description="Public HTTPS URL Telegram posts updates to; unset = long polling."
    )
    webhook_listen: str = Field(
        "127.0.0.1", description="Where the webhook server listens (behind your proxy)."
    )
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: str | None = Field(None, description="Checked on every update; unset = a random one.")


class FeishuConfig(ChannelConfig):
    app_id: str | None = None
    app_secret: str | None = None
    domain: str | None = Field(None, description="feishu (default), lark, or the open platform URL.")


class DingTalkConfig(ChannelConfig):
    client_id: str | None = None
    client_secret: str | None = None
    card_template_id: str | None = Field(
        None, description="An AI card template to stream answers into; unset = Markdown replies."
    )
    card_content_key: str = Field("content", description="The template's variable holding the answer.")
    base_url: str | None = Field(None, description="Open API base URL (tests point it at a local fake).")


class ChannelsConfig(Section):
    stream_update_seconds: float = Field(1.0, ge=0, description="Least time between partial reply edits.")
    subagent_enabled: bool = Field(
        False, description="Chat runs may delegate to subagents (the task tool); progress shows in the reply."
    )
    slack: SlackConfig = Field(default_factory=SlackConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)
    dingtalk: DingTalkConfig = Field(default_factory=DingTalkConfig)


class GatewayToken(Section):
    token: str
    user_id: str
    admin: bool = Field(
        False, description="May change what runs on the servers: MCP servers (their commands, env, URLs)."
    )


class AuthConfig(Section):
    """Accounts with sign-in for browsers (DeerFlow's web UI); bearer tokens work beside them."""

    allow_registration: bool = Field(
        False, description="Visitors may create their own (non-admin) account from the sign-in page."
    )
    allow_initialize: bool = Field(
        True,
        description="While no account exists, the web UI's setup page may create the first admin; "
        "false = accounts only from `antler user add`.",
    )
    session_days: float = Field(7.0, gt=0, description="How long a sign-in lasts.")
    session_secret: str | None = Field(
        None,
        description="Key signing session cookies (e.g. $ANTLER_SESSION_SECRET); unset = one made once "
        "and kept on the bus, shared by every gateway.",
    )
    max_login_failures: int = Field(
        5, ge=1, description="Failed sign-ins (per account, and per client address) before a lockout."
    )
    lockout_minutes: float = Field(5.0, gt=0, description="How long a lockout lasts after the last failure.")
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of your reverse proxies; only from them is X-Forwarded-For "
        "believed (for the per-address lockout) and X-Forwarded-Proto (for Secure cookies).",
    )
    secure_cookies: bool | None = Field(
        None, description="Mark cookies Secure; null = when the request came over HTTPS."
    )


class GatewayConfig(Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(2026, ge=0, le=65535)
    tokens: list[GatewayToken] = Field(
        default_factory=list, description="Bearer tokens; empty = loopback only."
    )
    cors_origins: list[str] = Field(default_factory=list)
    docs_enabled: bool = True
    max_upload_mb: int = Field(50, gt=0)
    auth: AuthConfig = Field(default_factory=AuthConfig)


class AppConfig(Section):
    """The whole of config.yaml."""

    config_version: int = 1
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    bus: BusConfig = Field(default_factory=BusConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    models: list[ModelConfig] = Field(default_factory=list, description="The first one is the default.")
    model_calls: ModelCallsConfig = Field(default_factory=ModelCallsConfig)
    tool_groups: list[ToolGroupConfig] = Field(default_factory=list)
    tools: list[ToolConfig] = Field(default_factory=list)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    title: TitleConfig = Field(default_factory=TitleConfig)
    summarization: SummarizationConfig = Field(default_factory=SummarizationConfig)
    goal: GoalConfig = Field(default_factory=GoalConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)

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
