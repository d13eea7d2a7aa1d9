"""The chat router: chat messages in, agent runs out, run events back as chat replies.

Three durable consumers:

- inbound (`<prefix>.chat.in.*.*.<partition>`, per partition this router owns: each chat's
  messages in order, chats side by side): policy (allowlists, mentions in groups),
  chat -> thread (KV `<prefix>_chats`), commands answered here (/new /status
  /models /memory /goal /compact /help; /schedule /schedules /unschedule by asking the
  scheduler), everything else becomes a RunRequest with the chat as origin.
  Runs of one chat queue behind each other (multitask enqueue).
  The run id is derived from the platform message, so a platform's retry —
  even after the dedupe window — never starts a second run.
- unbind (`<prefix>.events.thread.deleted`): the router owns chat bindings;
  a chat whose thread was deleted starts a fresh one.
- projection (`<prefix>.runs.ev.*.chat.*.<partition>`, per partition owned): chat runs' events
  back as chat replies (`channels.replies`).

Inbound messages and chat runs' events are stored by chat partition; any number of router
processes share the partitions, one owner each, through leases in the bus (`channels.partitions`),
so each chat's messages become runs in the order sent and its replies go out in order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from nats.js.api import DeliverPolicy, ObjectMeta

from bus import Abandon, Bus, Consumer, Defer, Delivery, Reject, Retry, run_consumers
from bus.chat_partitions import chat_partitions, streams_count
from bus.files import inbox_prefix, safe_filename, upload_key
from bus.layout import upload_path
from bus.messages import (
    ChatBinding,
    ChatOrigin,
    InboundMessage,
    MemoryDocument,
    MultitaskStrategy,
    OutboundMessage,
    RunRecord,
    RunRequest,
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadDeleted,
    ThreadRecord,
    utcnow,
)
from bus.records import RecordStore, repair_by_key
from bus.runs import SubmissionOrder, submit_run
from bus.service import ServiceError, call, start_service
from channels import goal_command
from channels.commands import CHAT_COMMANDS, spelled
from channels.compact import compact_chat
from channels.partitions import DIRECT_DURABLE, Partitions, continue_chat, inbound_durable, partition_of
from channels.replies import FinalsInOrder, RecentOrigins, ReplyProjection, projection_consumer
from channels.schedule_commands import SCHEDULE_COMMANDS, schedule_command
from config import AppConfig, ChannelConfig
from skills import read_catalog, skills_help, slash_command

log = logging.getLogger(__name__)
# Pauses between tries of a chat message that met a bus failure (a stream electing a leader, say),
# kept in the handler so the chat's next message waits: about 15 s in all, then the consumer's retries.
INLINE_RETRIES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)

RUN_NAMESPACE = uuid.UUID("5f0c0e55-4b0a-4c57-9d3e-7a1c2b3d4e5f")
HELP = "I am an AI agent. Send me a message and I will work on it.\n" + "\n".join(
    f"/{name} - {about}" for name, about in CHAT_COMMANDS
)


def chat_key(channel: str, chat_id: str, topic_id: str | None) -> str:
    """KV key of a chat (dots separate the parts; each part made a safe token)."""
    return ChatBinding.key_of(channel, chat_id, topic_id)


def chat_user(message: InboundMessage) -> str:
    """The user id a chat user has in Antler: per platform, so memory and files never mix."""
    return f"{message.channel}:{message.user_id}"


class Router:
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config
        self.chats: RecordStore[ChatBinding] | None = None
        self.threads: RecordStore[ThreadRecord] | None = None
        self.runs: RecordStore[RunRecord] | None = None
        self.memory: RecordStore[MemoryDocument] | None = None
        self.origins = RecentOrigins()  # the chats of runs submitted here, for the reply projection
        self.finals = FinalsInOrder()  # a thread's finals in the order its runs were submitted here
        self.order = SubmissionOrder()  # a chat's runs are taken by runners in the order sent
        self.events_start: dict[int, int | None] = {}  # partition -> where its events durable began

    async def open(self) -> None:
        s = self.bus.subjects
        self.chats = RecordStore(await self.bus.kv(s.chats_bucket), ChatBinding)
        self.threads = RecordStore(
            await self.bus.kv(s.threads_bucket), ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id")
        )
        self.runs = RecordStore(await self.bus.kv(s.runs_bucket), RunRecord)
        self.memory = RecordStore(await self.bus.kv(s.memory_bucket), MemoryDocument)

    # ------------------------------------------------------------------ inbound

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
        for pause in (*INLINE_RETRIES, None):
            try:
                return await self._on_inbound(message, delivery)
            except (Reject, Abandon, Defer, Retry):
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

    async def _on_inbound(self, message: InboundMessage, delivery: Delivery) -> None:
        if not self.allowed(message):
            log.info("ignoring a message from %s in %s (policy)", message.user_id, message.chat_key())
            return
        text = message.text.strip()
        command = slash_command(text)
        if command is not None and command[0] == "goal" and goal_command.parse(command[1])[0] == "set":
            binding = await self.binding(message)
            text = await self.set_goal(message, binding, command[1])  # the objective becomes the message
            if text is None:
                return
        elif command is not None and await self.command(message, *command):
            return
        binding = await self.binding(message)
        run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        uploaded = await self.file_uploads(message, binding)
        if uploaded:
            listing = "\n".join(f"- {path}" for path in uploaded)
            text = f"{text}\n\n[Files sent with this message, now in the sandbox:\n{listing}]".strip()
        configurable: dict[str, Any] = {}
        if binding.model_name:
            configurable["model_name"] = binding.model_name
        if self.config.channels.subagent_enabled:
            configurable["subagent_enabled"] = True
        origin = ChatOrigin(
            channel=message.channel,
            chat_id=message.chat_id,
            topic_id=message.topic_id,
            message_id=message.message_id,
            user_id=message.user_id,
            platform=message.metadata,
        )
        self.origins.remember(run_id, origin)
        request = RunRequest(
            run_id=run_id,
            thread_id=binding.thread_id,
            user_id=binding.user_id,
            input={"messages": [{"role": "user", "content": text}]},
            config={"configurable": configurable},
            metadata={"origin": origin.model_dump(exclude_none=True)},
            stream_mode=["messages-tuple", "custom"],  # custom: subagents' progress
            multitask_strategy=MultitaskStrategy.ENQUEUE,
            origin=origin,
        )
        if not self.order.knows(binding.thread_id):  # a chat taken over: after its last owner's runs
            assert self.runs is not None
            partition = partition_of(delivery.subject)
            request = await continue_chat(
                self.bus, self.runs, self.finals, request, self.events_start.get(partition, None)
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
        # As stored: the subject published on, then the partition the stream added; or, without the
        # chat's route (a script's raw publish), the channel's own subject.
        routed = subject.rsplit(".", 1)[0] == self.bus.subjects.chat_in(message.channel, message.chat_id)
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

    async def binding(self, message: InboundMessage, *, fresh: bool = False) -> ChatBinding:
        """The chat's thread, created on first contact (or anew for /new), safely under concurrency."""
        assert self.chats is not None
        assert self.threads is not None
        key = chat_key(message.channel, message.chat_id, message.topic_id)
        if not fresh:
            current = await self.chats.get(key)
            if current is not None:
                return current
        thread_id = str(uuid.uuid4())
        user_id = chat_user(message)

        def bind(current: ChatBinding | None) -> ChatBinding | None:
            if current is not None and not fresh:
                return None  # another message of this chat created it meanwhile
            return ChatBinding(
                channel=message.channel,
                chat_id=message.chat_id,
                topic_id=message.topic_id,
                thread_id=thread_id,
                user_id=user_id,
                model_name=current.model_name if current else None,
            )

        binding = await self.chats.update(key, bind)
        assert binding is not None
        if binding.thread_id == thread_id:  # the runners own thread records: ask them for this one
            metadata = {"channel": message.channel, "chat_id": message.chat_id}
            request = ThreadCreateRequest(thread_id=thread_id, user_id=user_id, metadata=metadata)
            try:
                await call(self.bus, "threads", "create", request, ThreadCreateReply, timeout=10)
            except ServiceError as exc:  # its first run creates it (without the chat's metadata)
                log.warning("thread %s of chat %s not recorded yet: %s", thread_id, key, exc.message)
        return binding

    async def on_thread_deleted(self, event: ThreadDeleted, delivery: Delivery) -> None:
        """Chats bound to a deleted thread start a fresh one with their next message."""
        assert self.chats is not None
        for key in await self.chats.keys():
            binding = await self.chats.get(key)
            if binding is not None and binding.thread_id == event.thread_id:
                await self.chats.delete(key)
                log.info("chat %s is unbound from deleted thread %s", key, event.thread_id)

    async def command(self, message: InboundMessage, name: str, argument: str) -> bool:
        """Answer a chat command; False for a skill's name: the message goes to the agent."""
        if name == "new":
            binding = await self.binding(message, fresh=True)
            reply = f"Started a new conversation ({binding.thread_id[:8]})."
        elif name == "status":
            reply = await self.status(message)
        elif name == "models":
            reply = await self.models(message, argument)
        elif name == "memory":
            reply = await self.recall(message)
        elif name == "goal":  # shown or cleared here; set in `_on_inbound`, as the message goes on
            binding = await self.binding(message)
            if goal_command.parse(argument)[0] == "clear":
                reply = await goal_command.clear(self.bus, binding.thread_id, binding.user_id)
            else:
                assert self.threads is not None
                reply = goal_command.shown(await self.threads.get(binding.thread_id))
        elif name == "compact":
            reply = await compact_chat(self.bus, await self.binding(message))
        elif name in SCHEDULE_COMMANDS:
            reply = await schedule_command(self.bus, message, chat_user(message), name, argument)
        else:
            catalog = await read_catalog(self.bus)
            skill = catalog.get(name) if catalog is not None else None
            if skill is not None and skill.enabled:
                return False  # the runner activates it
            listed = skills_help(catalog, lambda skill: spelled(message.channel, skill))
            full_help = HELP + (f"\n\n{listed}" if listed else "")
            if name in ("help", "start"):
                reply = full_help
            elif skill is not None:
                reply = (
                    f"The skill /{spelled(message.channel, skill.name)} is switched off here; "
                    "an administrator can enable it."
                )
            else:
                reply = f"There is no command or skill called /{name}.\n\n{full_help}"
        await self.reply(message, reply)
        return True

    async def set_goal(self, message: InboundMessage, binding: ChatBinding, objective: str) -> str | None:
        """Set the chat's thread goal; the objective to send on as the message (None: refused, said so)."""
        goal_id = goal_command.goal_id_for(message.dedupe_id())
        try:
            await goal_command.change(self.bus, binding.thread_id, binding.user_id, objective, goal_id)
        except ServiceError as exc:
            if exc.code not in ("invalid", "not_found"):
                raise  # no runner answered: tried again like any bus failure
            await self.reply(message, f"Could not set the goal: {exc.message}")
            return None
        return objective

    async def status(self, message: InboundMessage) -> str:
        assert self.threads is not None
        binding = await self.binding(message)
        thread = await self.threads.get(binding.thread_id)
        model = binding.model_name or (
            self.config.get_model().name if self.config.get_model() else "none configured"
        )
        busy = f"working on run {thread.active_run_id[:8]}" if thread and thread.active_run_id else "idle"
        title = thread.title if thread and thread.title else "untitled"
        return f"Conversation {binding.thread_id[:8]} ({title})\nModel: {model}\nStatus: {busy}"

    async def models(self, message: InboundMessage, choice: str) -> str:
        assert self.chats is not None
        names = [m.name for m in self.config.models]
        if not choice:
            binding = await self.binding(message)
            current = binding.model_name or (names[0] if names else None)
            lines = [f"{'* ' if n == current else '  '}{n}" for n in names] or ["no models are configured"]
            return "Models (choose with /models <name>):\n" + "\n".join(lines)
        if choice not in names:
            return f"There is no model {choice!r}. Available: {', '.join(names) or 'none'}"
        binding = await self.binding(message)
        key = chat_key(message.channel, message.chat_id, message.topic_id)
        await self.chats.put(key, binding.model_copy(update={"model_name": choice, "updated_at": utcnow()}))
        return f"This chat now uses {choice}."

    async def recall(self, message: InboundMessage) -> str:
        assert self.memory is not None
        doc = await self.memory.get(MemoryDocument.key(chat_user(message)))
        if doc is None or doc.is_empty():
            return "I do not remember anything about you yet."
        user = doc.user
        lines = [s.summary for s in (user.work_context, user.personal_context, user.top_of_mind) if s.summary]
        lines += [f"- {fact.content}" for fact in sorted(doc.facts, key=lambda f: -f.confidence)[:15]]
        return "What I remember about you:\n" + "\n".join(lines)

    async def reply(self, message: InboundMessage, text: str) -> None:
        out = OutboundMessage(
            channel=message.channel,
            chat_id=message.chat_id,
            topic_id=message.topic_id,
            reply_to=message.message_id,
            kind="command",
            text=text,
            metadata=message.metadata,
        )
        await self.bus.publish(
            self.bus.subjects.chat_out(message.channel), out, msg_id=f"command:{message.dedupe_id()}"
        )


async def run(bus: Bus, config: AppConfig) -> None:
    """The router component: its share of the chat partitions until cancelled, then drain."""
    router = Router(bus, config)
    await router.open()
    assert router.runs is not None
    s = bus.subjects
    projection = ReplyProjection(bus, config, router.runs, router.origins, router.finals)

    def partition_consumers(partition: int, events_start: int | None) -> list[Consumer[Any]]:
        router.events_start[partition] = events_start
        inbound = Consumer(
            bus,
            stream=s.chat_in_stream,
            durable=inbound_durable(partition),
            filter_subjects=[s.chat_in_partition(partition)],
            model=InboundMessage,
            handler=router.on_inbound,
            # A chat's messages become runs in the order sent; different chats go on at once.
            key=lambda message: chat_key(message.channel, message.chat_id, message.topic_id),
            concurrency=16,
        )
        consumers: list[Consumer[Any]] = [
            inbound,
            projection_consumer(bus, projection, partition, events_start),
        ]
        if partition == 0:  # and those published without their chat's route (scripts)
            direct = Consumer(
                bus,
                stream=s.chat_in_stream,
                durable=DIRECT_DURABLE,
                filter_subjects=[s.chat_in_direct],
                model=InboundMessage,
                handler=router.on_inbound,
                key=lambda message: chat_key(message.channel, message.chat_id, message.topic_id),
                concurrency=16,
            )
            consumers.append(direct)
        return consumers

    # The streams' count, not this process's setting: every partition that stores messages is served
    # (and a count changed by provisioning is followed at the next look).
    count = await chat_partitions(bus)
    partitions = Partitions(
        bus, count, config.bus.lease_seconds, partition_consumers, recount=lambda: streams_count(bus)
    )
    unbind = Consumer(
        bus,
        stream=s.events_stream,
        durable="router-thread-deleted",
        filter_subjects=[s.event("thread.deleted")],
        model=ThreadDeleted,
        handler=router.on_thread_deleted,
        deliver_policy=DeliverPolicy.NEW,
    )
    # No requests to answer; a service so that `$SRV` discovery (and /health) counts routers.
    presence = await start_service(bus, "router", [], description="Chat router (chats -> runs -> replies)")
    sharing = asyncio.create_task(partitions.run(), name="router-partitions")
    try:
        await run_consumers(unbind)
    finally:
        partitions.stop()
        await asyncio.gather(sharing, return_exceptions=True)
        await presence.stop()
