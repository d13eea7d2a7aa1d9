"""The lead agent's system prompt: short, with skills, memory and subagent sections when they apply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date

from agents.graph.middleware._untrusted_text import fence, label
from bus.layout import OUTPUTS, UPLOADS, WORKSPACE
from skills import Skill

_BASE = """You are {agent_name}, an AI agent that gets things done for the user. Today is {today}.
Think about what the user actually needs, use your tools when they help, and answer in the user's language.
If the request is ambiguous or lacks information you cannot find yourself, call ask_clarification
instead of guessing."""

_FILES = f"""<files>
Uploaded files: {UPLOADS}. Work in {WORKSPACE}.
Save deliverables to {OUTPUTS} and call present_files so the user gets them.
</files>"""

_SKILLS = """<skills>
Skills are tested instructions for specific tasks. When one fits, read its SKILL.md first and follow it.
{items}
</skills>"""

_SUBAGENTS = """<subagents>
For independent pieces of work, delegate with the task tool (at most {limit} at once); each subagent
starts fresh, so give it everything it needs in the prompt. Combine their results yourself.
</subagents>"""


def skills_section(skills: Sequence[Skill], container_path: str) -> str:
    """The prompt's list of skills, each with where its SKILL.md is."""
    items = "\n".join(f"- {s.name}: {s.description} ({s.container_file(container_path)})" for s in skills)
    return _SKILLS.format(items=items)


_ACTIVE_SKILL = """<active_skill name="{name}">
The user started this message with /{name}: follow this skill's instructions for it.
{instructions}
</active_skill>"""

_BOOTSTRAP = """<new_agent name="{name}">
The user is creating a new custom agent called {name} with you. Find out, in a few questions,
what it is for, its personality and tone, what it must and must never do. Then write its SOUL.md
(a short Markdown document in the second person: "You are ...") and call setup_agent with it and a
one-line description. Tell the user the agent is ready once the tool confirms it.
</new_agent>"""


def uploads_section(
    uploads: Sequence[tuple[str, str, int]], outlines: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The files the user sent with this message (name, path, size in bytes or -1), each followed by
    its outline's lines when `outlines` (by path) has them (`agents.tools.uploads.outline_lines`)."""
    lines = ["<current_uploads>", "The user sent these files with this message; read them before answering:"]
    for name, path, size in uploads:
        shown = f", {size / 1024:.1f} KB" if size >= 0 else ""
        # A file's name and its text are the sender's words, not ours: the name a one-line label,
        # the outline (its headings or first lines) fenced as untrusted content.
        lines.append(f"- {label(name, 200)} ({label(path, 300)}{shown})")
        heading, *outline = (outlines or {}).get(path, ()) or ("",)
        if outline:
            lines += [heading, fence("\n".join(outline), f"outline of {label(name, 200)}")]
    return "\n".join([*lines, "</current_uploads>"])


def build_system_prompt(
    *,
    agent_name: str = "Antler",
    skills: Sequence[Skill] = (),
    skills_container_path: str = "/mnt/skills",
    memory: str | None = None,
    files: bool = False,
    subagents_limit: int | None = None,
    soul: str | None = None,
    active_skill: tuple[str, str] | None = None,
    bootstrap: str | None = None,
    uploads: Sequence[tuple[str, str, int]] = (),
    upload_outlines: Mapping[str, Sequence[str]] | None = None,
    today: date | None = None,
) -> str:
    """`active_skill` is (name, SKILL.md instructions) of a skill the user activated with a slash
    command; `bootstrap` the name of a custom agent being created in this conversation."""
    parts = [_BASE.format(agent_name=agent_name, today=(today or date.today()).isoformat())]
    if soul:
        parts.append(f"<soul>\n{soul.strip()}\n</soul>")
    if bootstrap:
        parts.append(_BOOTSTRAP.format(name=bootstrap))
    if files:
        parts.append(_FILES)
    if skills:
        parts.append(skills_section(skills, skills_container_path))
    if uploads:
        parts.append(uploads_section(uploads, upload_outlines))
    if active_skill:
        parts.append(_ACTIVE_SKILL.format(name=active_skill[0], instructions=active_skill[1].strip()))
    if memory:
        parts.append(
            f"<memory>\nWhat you know about the user from earlier conversations:\n{memory.strip()}\n</memory>"
        )
    if subagents_limit:
        parts.append(_SUBAGENTS.format(limit=subagents_limit))
    return "\n\n".join(parts)
