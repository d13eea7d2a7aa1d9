"""The router's inbound side: a chat message becomes an agent run, or a command's answer.

Per message, in the chat's turn: policy (allowlists, mentions in groups), then a chat command
(`commands`: answered here, or passed on), then chat -> thread (`bindings`), the files the adapter
staged moved into the thread's uploads, and a RunRequest with the chat as its origin. Runs of one
chat queue behind each other (multitask enqueue). The run id is derived from the platform message,
so a platform's retry, even after the dedupe window, never starts a second run.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from typing import Any

from nats.js.api import ObjectMeta
from nats.js.errors import NotFoundError

from bus import Abandon, AfterEarlier, Bus, Defer, Delivery, Reject, Retry
from bus.files import inbox_prefix, safe_filename, upload_key
from bus.layout import upload_path
from bus.messages import (
    ChatBinding,
    InboundMessage,
    MemoryDocument,
    MultitaskStrategy,
    OutboundMessage,
    RunCommand,
    RunRecord,
    RunRequest,
    ThreadRecord,
)
from bus.records import RecordStore, repair_by_key
from bus.runs import SubmissionOrder, submit_run
from channels.router import commands
from channels.router.bindings import Bindings
from channels.router.ordering import FinalsInOrder, RecentOrigins
from channels.router.partitions import EventsStart, continue_chat, partition_of
from config import AppConfig, ChannelConfig
from skills import slash_command

log = logging.getLogger(__name__)
# Pauses between tries of a chat message that met a bus failure (a stream electing a leader, say),
# kept in the handler so the chat's next message waits: about 15 s in all, then the consumer's retries.
INLINE_RETRIES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)

IN_TURN_KEPT = 100_000  # chats' subjects remembered as in turn (the oldest forgotten: checked again)

RUN_NAMESPACE = uuid.UUID("5f0c0e55-4b0a-4c57-9d3e-7a1c2b3d4e5f")


class Router:
    """The chat router's inbound handling, with every store it needs (`Router.open` builds one)."""

    def __init__(
        self,
        bus: Bus,
        config: AppConfig,
        *,
        chats: RecordStore[ChatBinding],
        threads: RecordStore[ThreadRecord],
        runs: RecordStore[RunRecord],
        memory: RecordStore[MemoryDocument],
    ) -> None:
        self.bus = bus
        self.config = config
        self.runs = runs
        self.bindings = Bindings(bus, chats)
        self.commands = commands.CommandContext(bus, config, self.bindings, threads, memory)
        self.origins = RecentOrigins()  # the chats of runs submitted here, for the reply projection
        self.finals = FinalsInOrder()  # a thread's finals in the order its runs were submitted here
        self.order = SubmissionOrder()  # a chat's runs are taken by runners in the order sent
        self.events_start: dict[int | None, EventsStart] = {}  # partition -> where its events durables began
        # Chats' subjects (stream, subject) whose first message since this process connected (or last
        # reconnected) was the oldest the stream still held of them (`_in_turn`).
        self._in_turn: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._waited: OrderedDict[tuple[str, int], None] = OrderedDict()  # messages that waited once
        bus.on_reconnected(lambda outage: self._in_turn.clear())

    @classmethod
    async def open(cls, bus: Bus, config: AppConfig) -> Router:
        """A router on the bus's records: chat bindings, threads, runs and memory documents."""
        s = bus.subjects
        return cls(
            bus,
            config,
            chats=RecordStore(await bus.kv(s.chats_bucket), ChatBinding),
            threads=RecordStore(
                await bus.kv(s.threads_bucket), ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id")
            ),
            runs=RecordStore(await bus.kv(s.runs_bucket), RunRecord),
            memory=RecordStore(await bus.kv(s.memory_bucket), MemoryDocument),
        )

    def _policy(self, message: InboundMessage) -> ChannelConfig | None:
        return getattr(self.config.channels, message.channel, None)

    def allowed(self, message: InboundMessage) -> bool:
        policy = self._policy(message)
        if policy is None:  # cli and scripts: trusted publishers on the bus
            return True
        if policy.allowed_users and message.user_id not in policy.allowed_users:
            return False
        if policy.allowed_chats and message.chat_id not in policy.allowed_chats:
            return False
        if message.chat_type == "group" and policy.require_mention_in_groups:
            return message.mentioned or message.reply_to_bot
        return True

    async def on_inbound(self, message: InboundMessage, delivery: Delivery) -> None:
        """Handle a chat message; a bus failure is retried here, holding the chat's turn.

        Given back to the consumer, a failed message would be redelivered after the chat's next
        message had become a run (seen while a cluster node died): a chat's messages must become
        runs in the order sent. Handling a message again is safe (its run id is its message's).
        """
        self.check_origin(message, delivery.subject)
        await self._in_turn_of_chat(message, delivery)
        for pause in (*INLINE_RETRIES, None):
            try:
                return await self._on_inbound(message, delivery)
            except (Reject, Abandon, Defer, Retry, AfterEarlier):
                raise
            except Exception as exc:
                if pause is None:
                    raise
                log.warning(
                    "message %s: %s: %s; trying again in %gs",
                    message.dedupe_id(),
                    type(exc).__name__,
                    exc,
                    pause,
                )
                await asyncio.sleep(pause)

    async def _in_turn_of_chat(self, message: InboundMessage, delivery: Delivery) -> None:
        """Hold a chat's message back while an earlier one of the chat is still in the stream, unhandled.

        Asked of a chat's first message since this process connected to NATS, or reconnected: a
        message the server handed out just before it went away can be lost on the way and come again
        only after the ack wait, while the chat's next one, sent after the outage, comes at once (a
        chat's answers came out of order after a nats-server was killed). `CHAT_IN` is a work queue:
        what it holds of a chat is what has not been handled. One read per chat and connection.

        Raises:
            AfterEarlier: an earlier message of the chat is in the stream: this one waits for it in
                the consumer (at most some ack waits: it may have gone to another router), once.
        """
        try:
            stream = delivery.msg.metadata.stream
        except Exception:  # not a stream's message (a handler called by hand)
            return
        chat_subject = self.bus.subjects.chat_in(message.channel, message.chat_id)
        if not stream or chat_subject not in (delivery.subject, delivery.subject.rsplit(".", 1)[0]):
            return  # published on the channel's subject (a script's): no subject of its chat's own
        place = (stream, delivery.subject)
        if place in self._in_turn:
            return
        try:
            oldest = await self.bus.js.get_msg(stream, seq=1, subject=delivery.subject, next=True)
        except NotFoundError:
            oldest = None
        waited = (stream, delivery.stream_seq)
        if oldest is not None and oldest.seq is not None and oldest.seq < delivery.stream_seq:
            if waited not in self._waited:
                self._waited[waited] = None
                while len(self._waited) > IN_TURN_KEPT:
                    self._waited.popitem(last=False)
                log.info(
                    "message %s waits for the chat's earlier message (seq %d) to be handled first",
                    message.dedupe_id(),
                    oldest.seq,
                )
                raise AfterEarlier(oldest.seq)
            log.warning(
                "message %s goes on although the chat's earlier message (seq %d) is still unhandled",
                message.dedupe_id(),
                oldest.seq,
            )
        self._waited.pop(waited, None)
        self._in_turn[place] = None
        while len(self._in_turn) > IN_TURN_KEPT:
            self._in_turn.popitem(last=False)

    async def _on_inbound(self, message: InboundMessage, delivery: Delivery) -> None:
        if not self.allowed(message):
            log.info("ignoring a message from %s in %s (policy)", message.user_id, message.chat_key())
            return
        text = message.text.strip()
        command = slash_command(text)
        run_context: dict[str, Any] = {}
        resume: Any = None
        run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        if command is not None:
            answer = await commands.answer(self.commands, message, *command)
            if not isinstance(answer, commands.PassOn):
                await self.reply(message, answer)
                return
            text = answer.text if answer.text is not None else text
            run_context = dict(answer.context or {})
            resume, run_id = answer.resume, answer.run_id or run_id
        made: list[str] = []
        binding = await self.bindings.of(message, record_thread=False, made=made)  # its run records it
        uploaded = await self.file_uploads(message, binding)
        if uploaded:
            listing = "\n".join(f"- {path}" for path in uploaded)
            text = f"{text}\n\n[Files sent with this message, now in the sandbox:\n{listing}]".strip()
        configurable: dict[str, Any] = {}
        if binding.model_name:
            configurable["model_name"] = binding.model_name
        if self.config.channels.subagent_enabled:
            configurable["subagent_enabled"] = True
        origin = message.origin()
        self.origins.remember(run_id, origin)
        partition = partition_of(delivery.subject)
        request = RunRequest(
            run_id=run_id,
            thread_id=binding.thread_id,
            user_id=binding.user_id,
            input=None if resume is not None else {"messages": [user_message(message, text)]},
            command=RunCommand(resume=resume) if resume is not None else None,
            config={"configurable": configurable},
            context=run_context,
            metadata={"origin": origin.model_dump(exclude_none=True)},
            stream_mode=["messages-tuple", "custom"],  # custom: subagents' progress
            # An answer to an approval waits for nothing to steer: it resumes the thread in turn.
            multitask_strategy=MultitaskStrategy.ENQUEUE
            if resume is not None
            else MultitaskStrategy(self.config.channels.multitask_strategy),
            origin=origin,
            # Its events go to the partition this router reads the chat from, not to the one the
            # count it read last would give: after the count was lowered, that partition's events
            # stream could still be there with no router reading it (the answer was never sent).
            events_partition=partition,
        )
        if not made and not self.order.knows(binding.thread_id):
            # A chat taken over: after its last owner's runs (a thread this message made has none).
            request = await continue_chat(
                self.bus, self.runs, self.finals, request, self.events_start.get(partition, {})
            )
        request = self.order.stamp(request)
        self.finals.submitted(binding.thread_id, run_id)
        if await submit_run(self.bus, request) is None:
            log.info("message %s was already turned into run %s", message.dedupe_id(), run_id)

    def check_origin(self, message: InboundMessage, subject: str) -> None:
        """Believe a message only what its subject proves: the subject is the publisher's right (each
        adapter's NATS user may publish only on its own channel), the body is anyone's say.

        Raises:
            Reject: its `channel` is not its subject's, or it names a file that was not staged for
                its own chat (another user's upload, say); dead-lettered, nothing moved or deleted.
        """
        # As stored: the chat's subject and its partition; the chat's subject alone (an adapter of an
        # earlier version); or, without the chat's route (a script's raw publish), the channel's own.
        stem = self.bus.subjects.chat_in(message.channel, message.chat_id)
        routed = stem in (subject, subject.rsplit(".", 1)[0])
        if not routed and subject != self.bus.subjects.chat_in_channel(message.channel):
            raise Reject(
                f"channel {message.channel!r} (chat {message.chat_id!r}) does not match the subject "
                f"it came on ({subject})"
            )
        staged = inbox_prefix(message.channel, message.chat_id)
        for file in message.files:
            if file.object_name and not file.object_name.startswith(staged):
                raise Reject(
                    f"file {file.name!r} names object {file.object_name!r}, which was not staged for "
                    f"this chat (expected under {staged})"
                )

    async def file_uploads(self, message: InboundMessage, binding: ChatBinding) -> list[str]:
        """Move files an adapter staged for this message into the thread's uploads; their virtual paths."""
        store = await self.bus.files()
        paths = []
        for file in message.files:
            if not file.object_name:
                continue
            name = safe_filename(file.name)
            try:
                staged = await store.get(file.object_name)
            except Exception as exc:  # gone (already filed on an earlier delivery): say so, keep going
                log.warning("chat file %s is not in the object store: %s", file.object_name, exc)
                continue
            key = upload_key(binding.user_id, binding.thread_id, name)
            headers = {"Content-Type": file.content_type or "application/octet-stream"}
            await store.put(key, staged.data or b"", meta=ObjectMeta(name=key, headers=headers))
            await store.delete(file.object_name)
            paths.append(upload_path(name))
        return paths

    async def reply(self, message: InboundMessage, text: str) -> None:
        """A command's answer, in the chat it came from (once, however often the message comes)."""
        out = OutboundMessage.answering(message.origin(), kind="command", text=text)
        await self.bus.publish(
            self.bus.subjects.chat_out(message.channel), out, msg_id=f"command:{message.dedupe_id()}"
        )


def user_message(message: InboundMessage, text: str) -> dict[str, Any]:
    """The run's input message. A group chat's is marked as a member's (`antler_sender`, read by the
    agent's UntrustedContentMiddleware), so the model reads it fenced, its display name as a label."""
    if message.chat_type != "group":
        return {"role": "user", "content": text}
    sender = {"chat_type": "group", "user_id": message.user_id, "name": message.user_name or message.user_id}
    return {"role": "user", "content": text, "additional_kwargs": {"antler_sender": sender}}
