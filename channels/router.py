"""The chat router: chat messages in, agent runs out, run events back as chat replies.

Two durable consumers:

- inbound (`<prefix>.chat.in.>`, each chat's messages in order, chats side
  by side): policy (allowlists, mentions in groups),
  chat -> thread (KV `<prefix>_chats`), commands answered here (/new /status
  /models /memory /help), everything else becomes a RunRequest with the chat
  as origin. Runs of one chat queue behind each other (multitask enqueue).
  The run id is derived from the platform message, so a platform's retry —
  even after the dedupe window — never starts a second run.
- projection (`<prefix>.runs.ev.>`, each run's events in order, runs side by
  side): for runs started from a chat,
  throttled partial replies while the answer streams, then one final reply
  (text, presented files, a clarification question, or a readable error) on
  `<prefix>.chat.out.<channel>`. A reply is built only from its own run's
  events: by the time a run's `end` is handled, the chat's next run may
  already have changed the thread. The final reply is deduplicated by run id;
  a router that missed some of a run's events (restarted mid-run, or another
  router process took them) reads them back from the log and delivers it once.
  With several router processes, a chat's messages may become runs out of
  order; run one router per prefix where that matters.
"""

from __future__ import annotations

import bisect
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import DeliverPolicy, ObjectMeta

from bus import Bus, Consumer, Delivery, run_consumers
from bus.content import text_of
from bus.files import output_key, safe_filename, upload_key
from bus.layout import output_relative, upload_path
from bus.messages import (
    ChatBinding,
    ChatOrigin,
    FileRef,
    InboundMessage,
    MemoryDocument,
    MultitaskStrategy,
    OutboundMessage,
    RunEvent,
    RunRecord,
    RunRequest,
    ThreadRecord,
    utcnow,
)
from bus.records import RecordStore
from bus.runs import follow_run, submit_run
from bus.subjects import safe_token
from config import AppConfig, ChannelConfig

log = logging.getLogger(__name__)

RUN_NAMESPACE = uuid.UUID("5f0c0e55-4b0a-4c57-9d3e-7a1c2b3d4e5f")
HELP = (
    "I am an AI agent. Send me a message and I will work on it.\n"
    "/new - start a fresh conversation\n"
    "/status - this conversation, its model and whether I am busy\n"
    "/models - list models; /models <name> - use one in this chat\n"
    "/memory - what I remember about you\n"
    "/help - this help"
)


def chat_key(channel: str, chat_id: str, topic_id: str | None) -> str:
    """KV key of a chat (dots separate the parts; each part made a safe token)."""
    parts = [channel, chat_id] + ([topic_id] if topic_id else [])
    return ".".join(safe_token(p) for p in parts)


def chat_user(message: InboundMessage) -> str:
    """The user id a chat user has in Antler: per platform, so memory and files never mix."""
    return f"{message.channel}:{message.user_id}"


@dataclass
class _Projection:
    """One chat run's reply, built only from that run's own events (never from the thread's state,
    which may already hold the chat's next run)."""

    origin: ChatOrigin
    thread_id: str
    texts: dict[str, str] = field(default_factory=dict)  # AI message id -> text so far
    order: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)  # AI message id -> attempt that streamed it
    pieces: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # AI message id -> (seq, delta)
    tool_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # call id -> name, args
    files: list[str] = field(default_factory=list)  # presented outputs, in order
    clarification: str | None = None
    applied: set[tuple[int, int]] = field(default_factory=set)  # (attempt, seq) of events taken in
    last_seq: int = 0
    seq: int = 0
    last_sent: float = 0.0
    sent_text: str = ""
    error: str | None = None

    def answer(self) -> str:
        return next((self.texts[m] for m in reversed(self.order) if self.texts[m]), "")

    def collect(self, data: Any, seq: int, attempt: int) -> None:
        """Take one `messages` event: assistant text, the tool calls it makes, their results."""
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            return
        chunk = data[0]
        kind = chunk.get("type")
        if kind in ("AIMessageChunk", "ai"):
            self._tool_calls(chunk)
            self._text(chunk, seq, attempt)
        elif kind == "tool":
            self._tool_result(chunk)

    def _text(self, chunk: dict[str, Any], seq: int, attempt: int) -> None:
        text = text_of(chunk.get("content"), sep="")
        message_id = chunk.get("id")
        if not text or not message_id:
            return  # only the assistant's own words reach a chat, never tool results or context
        if attempt < self.attempts.get(message_id, attempt):
            return  # an earlier delivery's late piece: the later attempt's text stands
        if self.attempts.get(message_id) != attempt:  # new, or streamed again by a resumed attempt
            if message_id in self.texts:
                self.order.remove(message_id)
            self.order.append(message_id)
            self.pieces[message_id] = []
            self.attempts[message_id] = attempt
            self.clarification = None  # the agent went on talking after its question
        if chunk.get("type") == "ai":
            self.pieces[message_id] = [(seq, text)]
            self.texts[message_id] = text
            return
        pieces = self.pieces[message_id]
        if not pieces or seq > pieces[-1][0]:
            pieces.append((seq, text))
            self.texts[message_id] = self.texts.get(message_id, "") + text
        elif all(s != seq for s, _ in pieces):  # stored late, after a server restart: put it in its place
            bisect.insort(pieces, (seq, text))
            self.texts[message_id] = "".join(t for _, t in pieces)

    def _tool_calls(self, chunk: dict[str, Any]) -> None:
        for call in chunk.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") and call.get("name"):
                args = call.get("args")
                self.tool_calls[call["id"]] = (call["name"], args if isinstance(args, dict) else {})

    def _tool_result(self, chunk: dict[str, Any]) -> None:
        name = chunk.get("name")
        if chunk.get("status") == "error":
            return
        if name == "ask_clarification":
            self.clarification = text_of(chunk.get("content"))
        elif name == "present_files":
            _, args = self.tool_calls.get(chunk.get("tool_call_id") or "", ("", {}))
            for path in args.get("filepaths") or []:
                if isinstance(path, str) and output_relative(path) and path not in self.files:
                    self.files.append(path.rstrip("/"))


class Router:
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config
        self.chats: RecordStore[ChatBinding] | None = None
        self.threads: RecordStore[ThreadRecord] | None = None
        self.runs: RecordStore[RunRecord] | None = None
        self.memory: RecordStore[MemoryDocument] | None = None
        self._projections: dict[str, _Projection | None] = {}

    async def open(self) -> None:
        s = self.bus.subjects
        self.chats = RecordStore(await self.bus.kv(s.chats_bucket), ChatBinding)
        self.threads = RecordStore(await self.bus.kv(s.threads_bucket), ThreadRecord)
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
        if not self.allowed(message):
            log.info("ignoring a message from %s in %s (policy)", message.user_id, message.chat_key())
            return
        text = message.text.strip()
        if text.startswith("/"):
            await self.command(message, text)
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
        origin = ChatOrigin(
            channel=message.channel,
            chat_id=message.chat_id,
            topic_id=message.topic_id,
            message_id=message.message_id,
            user_id=message.user_id,
            platform=message.metadata,
        )
        request = RunRequest(
            run_id=run_id,
            thread_id=binding.thread_id,
            user_id=binding.user_id,
            input={"messages": [{"role": "user", "content": text}]},
            config={"configurable": configurable},
            metadata={"origin": origin.model_dump(exclude_none=True)},
            stream_mode=["messages-tuple"],
            multitask_strategy=MultitaskStrategy.ENQUEUE,
            origin=origin,
        )
        assert self.runs is not None
        if await self.runs.get(run_id) is not None:
            log.info("message %s was already turned into run %s", message.dedupe_id(), run_id)
            return
        await submit_run(self.bus, request)

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
        if binding.thread_id == thread_id:
            now = utcnow()
            metadata = {"channel": message.channel, "chat_id": message.chat_id}
            thread = ThreadRecord(
                thread_id=thread_id, user_id=user_id, metadata=metadata, created_at=now, updated_at=now
            )
            await self.threads.create(thread_id, thread)
        return binding

    async def command(self, message: InboundMessage, text: str) -> None:
        name, _, argument = text[1:].partition(" ")
        name = name.split("@", 1)[0].lower()  # /help@MyBot in Telegram groups
        argument = argument.strip()
        if name == "new":
            binding = await self.binding(message, fresh=True)
            reply = f"Started a new conversation ({binding.thread_id[:8]})."
        elif name == "status":
            reply = await self.status(message)
        elif name == "models":
            reply = await self.models(message, argument)
        elif name == "memory":
            reply = await self.recall(message)
        elif name in ("help", "start"):
            reply = HELP
        else:
            reply = f"I do not know /{name}.\n\n{HELP}"
        await self.reply(message, reply)

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
        if doc is None or not (doc.facts or doc.work_context or doc.personal_context or doc.top_of_mind):
            return "I do not remember anything about you yet."
        lines = [text for text in (doc.work_context, doc.personal_context, doc.top_of_mind) if text]
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

    # ------------------------------------------------------------------ projection

    async def _projection(self, event: RunEvent) -> _Projection | None:
        if event.run_id in self._projections:
            return self._projections[event.run_id]
        assert self.runs is not None
        record = await self.runs.get(event.run_id)
        origin = (record.metadata.get("origin") if record else None) or None
        projection = _Projection(ChatOrigin.model_validate(origin), event.thread_id) if origin else None
        self._projections[event.run_id] = projection
        return projection

    async def _catch_up(self, event: RunEvent, projection: _Projection) -> None:
        """Read the run's events this router has not seen before `event` back from the log: it started
        while the run went on, or another router process handled them."""
        try:
            async for earlier in follow_run(
                self.bus, event.run_id, after_seq=projection.last_seq, timeout=10
            ):
                if earlier.seq >= event.seq:
                    break
                self._apply(projection, earlier)
        except TimeoutError:
            log.warning("run %s: could not read its earlier events; the reply may be partial", event.run_id)

    @staticmethod
    def _apply(projection: _Projection, event: RunEvent) -> None:
        # By attempt too: a resumed run may number from where it found the log while its earlier
        # delivery's last events were still arriving; both are taken (the later attempt's win).
        if (event.attempt, event.seq) in projection.applied:
            return
        projection.applied.add((event.attempt, event.seq))
        projection.last_seq = max(projection.last_seq, event.seq)
        if event.event == "messages":
            projection.collect(event.data, event.seq, event.attempt)
        elif event.event == "error":
            data = event.data if isinstance(event.data, dict) else {}
            projection.error = str(data.get("message") or data.get("error") or "unknown error")

    async def on_event(self, event: RunEvent, delivery: Delivery) -> None:
        projection = await self._projection(event)
        if event.event == "end":
            self._projections.pop(event.run_id, None)
        if projection is None:
            return  # not a chat's run (the gateway's, say)
        if event.seq > projection.last_seq + 1:
            await self._catch_up(event, projection)
        self._apply(projection, event)
        if event.event == "messages":
            await self._partial(event.run_id, projection)
        elif event.event == "end":
            await self._final(event, projection)

    async def _partial(self, run_id: str, projection: _Projection) -> None:
        now = time.monotonic()
        text = projection.answer()
        if not text or text == projection.sent_text:
            return
        if now - projection.last_sent < self.config.channels.stream_update_seconds:
            return
        projection.last_sent = now
        projection.sent_text = text
        projection.seq += 1
        await self._send(run_id, projection, "partial", text, msg_id=None)

    async def _final(self, event: RunEvent, projection: _Projection) -> None:
        status = (event.data or {}).get("status") if isinstance(event.data, dict) else None
        kind: str = "final"
        files: list[FileRef] = []
        if projection.error is not None or status == "error":
            kind = "error"
            text = f"Sorry, I could not finish that: {projection.error or 'the run failed'}"
        elif status in ("interrupted", "timeout"):
            kind = "error"
            text = (
                "I stopped before finishing." if status == "interrupted" else "That took too long; I stopped."
            )
        elif projection.clarification is not None:
            kind, text = "clarification", projection.clarification
        else:
            text = projection.answer() or "(no answer)"
            user_id = f"{projection.origin.channel}:{projection.origin.user_id}"
            files = [
                FileRef(
                    name=path.rsplit("/", 1)[-1],
                    path=path,
                    object_name=output_key(user_id, projection.thread_id, output_relative(path) or ""),
                )
                for path in projection.files
            ]
        projection.seq += 1
        await self._send(event.run_id, projection, kind, text, msg_id=f"reply:{event.run_id}", files=files)

    async def _send(
        self,
        run_id: str,
        projection: _Projection,
        kind: str,
        text: str,
        *,
        msg_id: str | None,
        files: list[FileRef] | None = None,
    ) -> None:
        origin = projection.origin
        out = OutboundMessage(
            channel=origin.channel,
            chat_id=origin.chat_id,
            topic_id=origin.topic_id,
            reply_to=origin.message_id,
            thread_id=projection.thread_id,
            run_id=run_id,
            kind=kind,  # type: ignore[arg-type]
            text=text,
            seq=projection.seq,
            files=files or [],
            metadata=origin.platform,
        )
        await self.bus.publish(self.bus.subjects.chat_out(origin.channel), out, msg_id=msg_id)


async def run(bus: Bus, config: AppConfig) -> None:
    """The router component: both consumers until cancelled, then drain."""
    router = Router(bus, config)
    await router.open()
    s = bus.subjects
    inbound = Consumer(
        bus,
        stream=s.chat_in_stream,
        durable="router",
        filter_subjects=[s.chat_in_all],
        model=InboundMessage,
        handler=router.on_inbound,
        # A chat's messages become runs in the order sent; different chats go on at once.
        key=lambda message: chat_key(message.channel, message.chat_id, message.topic_id),
        concurrency=32,
    )
    projection = Consumer(
        bus,
        stream=s.run_events_stream,
        durable="router-projection",
        filter_subjects=[s.run_events_all],
        model=RunEvent,
        handler=router.on_event,
        key=lambda event: event.run_id,  # a run's events in order; runs side by side
        concurrency=64,
        max_ack_pending=1024,
        deliver_policy=DeliverPolicy.NEW,
    )
    await run_consumers(inbound, projection)
