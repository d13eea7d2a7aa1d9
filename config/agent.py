"""What the agent does besides answering: tools, memory, titles, summarization, goals, tool output,
guardrails, subagents, skills."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from config._env import Section


class ToolGroupConfig(Section):
    name: str


class ToolConfig(Section):
    """A tool from config (`use: module:variable`); extra keys configure it."""

    model_config = ConfigDict(extra="allow")

    name: str
    group: str | None = None
    use: str


# What Antler has with no `tools:` section in config.yaml: the web tools that need no key
# (config.example.yaml lists the same). A newcomer whose config.yaml holds only a model still
# gets search and fetch; a config that lists tools gets exactly its list (`tools: []`: none).
DEFAULT_TOOLS: tuple[dict[str, object], ...] = (
    {
        "name": "web_search",
        "group": "web",
        "use": "agents.tools.community.web_search:make_web_search",
        "max_results": 5,
    },
    {
        "name": "web_fetch",
        "group": "web",
        "use": "agents.tools.community.web_fetch:make_web_fetch",
        "provider": "http",
        "max_chars": 4096,
    },
    {
        "name": "image_search",
        "group": "web",
        "use": "agents.tools.community.image_search:make_image_search",
        "max_results": 5,
    },
)


def default_tools() -> list[ToolConfig]:
    return [ToolConfig.model_validate(tool) for tool in DEFAULT_TOOLS]


def default_tool_groups() -> list[ToolGroupConfig]:
    return [ToolGroupConfig(name="web")]


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
    """A check before each tool call (`agents.graph.guardrails`); extra keys configure your own provider."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = False
    use: str = Field(
        "agents.graph.guardrails:AllowlistProvider", description="The provider, as module:Class."
    )
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
    drain_seconds: float = Field(
        15.0,
        gt=0,
        le=25,
        description="On stop, tasks get this long to finish; the rest go back to the bus for the next "
        "executor.",
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
