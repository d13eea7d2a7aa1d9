"""What a run brings to the model besides the thread: its system prompt (with the user's memory and
the skills), and what it leaves for the memory updater afterwards."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from agents.context import RunOptions
from agents.prompt import build_system_prompt
from bus import Bus
from bus.content import text_of
from bus.messages import ChatTurn, MemoryDocument, MemoryUpdate, RunRequest
from bus.records import RecordStore
from config import AppConfig
from skills import load_skills

log = logging.getLogger(__name__)


class PromptAssembly:
    """The system prompt of a run, and its memory update; one per runner process."""

    def __init__(self, bus: Bus, config: AppConfig, memory: RecordStore[MemoryDocument]) -> None:
        self.bus = bus
        self.config = config
        self.memory = memory
        self._skills: list[Any] | None = None

    async def system_prompt(self, user_id: str, options: RunOptions) -> str:
        return build_system_prompt(
            agent_name=options.agent_name or "Antler",
            skills=self.skills(),
            skills_container_path=self.config.skills.container_path,
            memory=await self.memory_text(user_id, options.agent_name),
            files=True,
            subagents_limit=self.config.subagents.max_concurrent
            if options.subagent_enabled and self.config.subagents.enabled
            else None,
        )

    def skills(self) -> list[Any]:
        """The skills directory, read once per process."""
        if self._skills is None:
            path = Path(self.config.skills.path)
            self._skills = load_skills(path) if path.is_dir() else []
        return self._skills

    async def memory_text(self, user_id: str, agent_name: str | None) -> str | None:
        """The user's memory as prompt lines, within the injection budget (None: nothing to inject)."""
        memory = self.config.memory
        if not (memory.enabled and memory.injection_enabled):
            return None
        doc = await self.memory.get(MemoryDocument.key(user_id, agent_name))
        if doc is None:
            return None
        lines = [
            f"{label}: {text}"
            for label, text in (
                ("Work", doc.work_context),
                ("Personal", doc.personal_context),
                ("Top of mind", doc.top_of_mind),
                ("Recently", doc.recent_months),
            )
            if text
        ]
        facts = sorted(doc.facts, key=lambda f: f.confidence, reverse=True)[:15]
        lines += [
            f"- {fact.content}" for fact in facts if fact.confidence >= memory.fact_confidence_threshold
        ]
        text = "\n".join(lines)
        budget = memory.max_injection_tokens * 4  # about four characters a token
        return text[:budget] if text else None

    async def queue_memory_update(
        self, request: RunRequest, options: RunOptions, values: dict[str, Any]
    ) -> None:
        """Hand the run's exchange (the user's message, the final answer) to the memory updater."""
        if not self.config.memory.enabled:
            return
        messages = values.get("messages") or []
        user = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        answer = next((m for m in reversed(messages) if isinstance(m, AIMessage) and not m.tool_calls), None)
        if user is None or answer is None or not text_of(answer.content):
            return
        update = MemoryUpdate(
            user_id=request.user_id,
            agent_name=options.agent_name,
            thread_id=request.thread_id,
            run_id=request.run_id,
            messages=[
                ChatTurn(role="user", content=text_of(user.content)),
                ChatTurn(role="assistant", content=text_of(answer.content)),
            ],
        )
        try:
            await self.bus.publish(self.bus.subjects.memory_update, update, msg_id=f"memory:{request.run_id}")
        except Exception as exc:  # memory is best effort; the run itself succeeded
            log.warning("run %s: could not queue memory update: %s", request.run_id, exc)
