"""What every chat command is given, and what it may answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bus import Bus
from bus.messages import InboundMessage, MemoryDocument, ThreadRecord
from bus.records import RecordStore
from channels.router.bindings import Bindings
from config import AppConfig


@dataclass(frozen=True)
class CommandContext:
    """The router's parts a command may use: the bus, the config, the chats' bindings, the records."""

    bus: Bus
    config: AppConfig
    bindings: Bindings
    threads: RecordStore[ThreadRecord]
    memory: RecordStore[MemoryDocument]


@dataclass(frozen=True)
class PassOn:
    """The message goes on to the agent (a skill's `/name`), as `text` when given (`/goal <text>`:
    the objective); no reply is sent here."""

    text: str | None = None
    context: dict[str, Any] | None = None  # the run's context (`/bootstrap`: is_bootstrap, agent_name)
    resume: Any = None  # the run resumes the thread's interrupt with this answer (`/approve`, `/deny`)
    run_id: str | None = None  # the run's id instead of the message's (one run per answered request)


# A command's answer: the reply to send in the chat, or `PassOn`.
Answer = str | PassOn
# (context, message, the command's name as typed, the words after it) -> answer
Handler = Callable[[CommandContext, InboundMessage, str, str], Awaitable[Answer]]
