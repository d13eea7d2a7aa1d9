"""Subagent types: the built-in `general-purpose` and `bash`, and those in `subagents.agents`.

A type says which tools a subagent gets, what it is told, and its model and
limits. The `task` tool's description lists them, so the lead agent can pick.
"""

from __future__ import annotations

from dataclasses import dataclass

from config import AppConfig

# Lead tools a subagent never gets: it cannot delegate further, ask the user, or present files
# (the lead agent talks to the user; it presents what the subagent wrote).
NOT_FOR_SUBAGENTS = frozenset({"task", "ask_clarification", "present_files"})
SANDBOX_TOOLS = ("bash", "ls", "read_file", "write_file", "str_replace", "glob", "grep")

_GENERAL = """You are a subagent: the lead agent gave you one task. Work on it on your own with your
tools; nobody can answer questions. Files are under /mnt/user-data (workspace, uploads, outputs).
When you are done, reply with the result itself: what you found or made, concretely and completely
(paths of files you wrote, numbers, sources), because your final message is all the lead agent sees."""

_BASH = """You are a command-line specialist subagent. Do the task with shell commands and file tools in
the sandbox (working directory /mnt/user-data/workspace). Check your results by running them.
Reply with what you ran, what came out, and where any files are; your final message is all the
lead agent sees."""


@dataclass(frozen=True)
class SubagentType:
    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] | None = None  # None: every lead tool a subagent may have
    skills: tuple[str, ...] = ()
    model_name: str | None = None
    max_turns: int | None = None
    timeout_seconds: float | None = None

    def allows(self, tool_name: str) -> bool:
        if tool_name in NOT_FOR_SUBAGENTS:
            return False
        return self.tools is None or tool_name in self.tools


BUILT_IN = (
    SubagentType(
        "general-purpose",
        "Any self-contained piece of work: research, reading and writing files, analysis, code.",
        _GENERAL,
    ),
    SubagentType(
        "bash",
        "Shell work: running commands, scripts and builds, inspecting and transforming files.",
        _BASH,
        tools=SANDBOX_TOOLS,
    ),
)


def subagent_types(config: AppConfig) -> dict[str, SubagentType]:
    """Every type by name; one from config replaces a built-in of the same name."""
    found = {t.name: t for t in BUILT_IN}
    for name, entry in config.subagents.agents.items():
        found[name] = SubagentType(
            name=name,
            description=entry.description,
            system_prompt=entry.system_prompt or _GENERAL,
            tools=tuple(entry.tools) if entry.tools is not None else None,
            skills=tuple(entry.skills or ()),
            model_name=entry.model_name,
            max_turns=entry.max_turns,
            timeout_seconds=entry.timeout_seconds,
        )
    return found
