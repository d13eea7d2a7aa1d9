"""One prompt of the agent protocol: a run (or several, across questions) streamed back to its caller.

The contract, per the protocol (v0.3): every prompt's stream starts with a `status: ack` chunk
and ends with the terminator (an empty message without headers); a refusal or failure is an error
frame (headers `Nats-Service-Error-Code` / `Nats-Service-Error`, codes 400 bad prompt, 404 no such
agent, 500 the run failed) before the terminator. In between: the answer as `response` chunks,
steps as `status` chunks (`agentproto.answer`), and, when the agent calls `ask_clarification`, a
`query` chunk whose answer (published on the query's reply subject, which only that owner's
credentials may publish on) becomes the next message of the same thread; that run's answer
continues the same stream.

The session is a thread: its id is derived from agent, owner and session, so prompting the same
session again continues the conversation; the owner is the runs' user. While a run works a
`status: ack` goes out every `keepalive_seconds`, sent as a request: a caller that is gone (its
connection closed: nobody is subscribed to its reply subject any more) makes the server answer
"no responders", and the run is cancelled — the protocol's cancellation (§6.7) is the caller
going away, there is no cancel message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from synadia_ai.agents import (
    Attachment,
    Envelope,
    ProtocolError,
    QueryChunk,
    ResponseChunk,
    StatusChunk,
    decode,
)
from synadia_ai.agents.messages import encode_chunk

from agentproto.answer import RunAnswer
from bus.clients import query_subject_prefix
from bus.files import output_key, safe_filename, upload_key
from bus.layout import output_relative, upload_path
from bus.messages import (
    MultitaskStrategy,
    RunCommand,
    RunRequest,
    ThreadCreateReply,
    ThreadCreateRequest,
)
from bus.runs import SubmissionOrder, cancel_run, follow_run, submit_run
from bus.service import ServiceError, call
from bus.tasks import cancel_and_wait

if TYPE_CHECKING:
    from nats.aio.msg import Msg

    from bus import Bus
    from config import AppConfig

log = logging.getLogger(__name__)

SESSION_NAMESPACE = uuid.UUID("0b8f3c52-2d1e-4a8e-9a59-6c1f5e2f7a10")
ERROR_CODE = "Nats-Service-Error-Code"
ERROR_TEXT = "Nats-Service-Error"
MSG_ID = "Nats-Msg-Id"
ACK = encode_chunk(StatusChunk(status="ack"))
PROBE_TIMEOUT = 1.0  # seconds a keep-alive waits for "no responders" (a caller there never answers)


class Refused(Exception):
    """A prompt answered with a protocol error (§9) instead of a run."""

    def __init__(self, code: int, description: str) -> None:
        self.code = code
        self.description = description
        super().__init__(f"{code}: {description}")


class CallerGone(Exception):
    """Nobody listens on the prompt's reply subject any more."""


@dataclass(frozen=True)
class Target:
    """Who a prompt is for: the protocol's tokens, and the custom agent's name (None: the lead agent)."""

    agent: str
    owner: str
    session: str
    agent_name: str | None = None

    @property
    def thread_id(self) -> str:
        return str(uuid.uuid5(SESSION_NAMESPACE, f"{self.agent}/{self.owner}/{self.session}"))


@dataclass(frozen=True)
class Host:
    """What a prompt needs of the agent host that received it."""

    bus: Bus
    config: AppConfig
    order: SubmissionOrder  # stamps each run request, so a session's runs keep their order
    ensure_thread: Callable[[Target], Awaitable[None]]  # the session's thread recorded with its owner


@dataclass
class PromptStream:
    """Serves one prompt request from receipt to terminator."""

    host: Host
    target: Target
    msg: Msg
    run_id: str | None = None  # the run in progress, cancelled if the caller goes
    _gone: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self) -> None:
        reply = self.msg.reply
        if not reply:
            log.info("prompt on %s without a reply subject: nobody to answer", self.msg.subject)
            return
        keepalive: asyncio.Task[None] | None = None
        try:
            envelope = self._decode(self.msg.data)
            await self._send(ACK)  # §6.4: before any work
            keepalive = asyncio.create_task(self._keepalive(reply))
            await self._until_gone(self._converse(envelope))
        except Refused as exc:
            log.info("prompt on %s refused: %s", self.msg.subject, exc)
            await self._error(exc.code, exc.description)
        except CallerGone:
            log.info("prompt on %s: the caller went away; run %s cancelled", self.msg.subject, self.run_id)
            await self._cancel_run()
            return
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self._error(500, "the agent host is stopping; the run goes on, ask again later")
                await self._send(b"")
            raise
        except Exception:
            log.exception("prompt on %s failed", self.msg.subject)
            await self._error(500, "internal error")
        finally:
            if keepalive is not None:
                keepalive.cancel()
        await self._send(b"")  # §6.5 terminator

    def _decode(self, data: bytes) -> Envelope:
        try:
            envelope = decode(data)
        except (ProtocolError, ValueError) as exc:
            raise Refused(400, f"not a prompt: {exc}") from None
        if not envelope.prompt.strip() and not envelope.attachments:
            raise Refused(400, "the prompt is empty")
        return envelope

    async def _converse(self, envelope: Envelope) -> None:
        """Runs on the session's thread until one ends with an answer (or an error)."""
        await self.host.ensure_thread(self.target)
        text = await self._with_uploads(envelope)
        request_id = (self.msg.headers or {}).get(MSG_ID)
        answer = await self._run(text, request_id)
        while True:
            outcome = answer.outcome()
            if outcome.kind == "error":
                raise Refused(500, outcome.text)
            if outcome.kind not in ("question", "approval"):
                await self._send_files(outcome.files)
                return
            reply = await self._ask(outcome.text)
            if reply is None:  # an approval's expiry denies it later (agents.runner.approvals)
                await self._chunk(ResponseChunk(text=f"\n\n{outcome.text}\n(no answer came; ask again)"))
                return
            if outcome.kind == "question":  # the answer is the conversation's next message
                answer = await self._run(await self._with_uploads(reply), None)
            else:  # a tool call waits for a yes: the answer resumes it
                answer = await self._run("", None, resume=reply.prompt.strip())

    async def _run(self, text: str, request_id: str | None, resume: Any = None) -> RunAnswer:
        """A run of `text` on the session's thread, or (`resume`) the answer to what it waits on."""
        t = self.target
        configurable: dict[str, Any] = {"agent_name": t.agent_name} if t.agent_name else {}
        # A caller's message id makes the run id: a prompt sent again is not run twice.
        run_id = str(uuid.uuid5(SESSION_NAMESPACE, f"{t.owner}/{request_id}") if request_id else uuid.uuid4())
        request = RunRequest(
            run_id=run_id,
            thread_id=t.thread_id,
            user_id=t.owner,
            input=None if resume is not None else {"messages": [{"role": "user", "content": text}]},
            command=RunCommand(resume=resume) if resume is not None else None,
            config={"configurable": configurable},
            metadata={"agent_protocol": {"agent": t.agent, "owner": t.owner, "session": t.session}},
            stream_mode=["messages-tuple", "custom"],
            multitask_strategy=MultitaskStrategy.ENQUEUE,
        )
        request = self.host.order.stamp(request)
        self.run_id = run_id
        await submit_run(self.host.bus, request)
        log.info("prompt on %s: run %s on thread %s", self.msg.subject, run_id, t.thread_id)
        answer = RunAnswer()
        async for event in follow_run(self.host.bus, run_id, live=True):
            for chunk in answer.take(event):
                await self._chunk(chunk)
        self.run_id = None
        return answer

    async def _ask(self, question: str) -> Envelope | None:
        """A `query` chunk, then the caller's answer (None: none came in time)."""
        query_id = uuid.uuid4().hex
        subject = f"{query_subject_prefix(self.host.bus.subjects, self.target.owner)}.{query_id}"
        sub = await self.host.bus.nc.subscribe(subject, max_msgs=1)
        try:
            await self._chunk(QueryChunk(id=query_id, reply_subject=subject, prompt=question))
            timeout = self.host.config.agent_protocol.clarification_timeout_seconds
            try:
                msg = await sub.next_msg(timeout=timeout)
            except NatsTimeout:
                return None
            try:
                return self._decode(msg.data)
            except Refused:
                return None
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _with_uploads(self, envelope: Envelope) -> str:
        """The prompt's text, with its attachments stored as the thread's uploads (listed at the end)."""
        if not envelope.attachments:
            return envelope.prompt
        store = await self.host.bus.files()
        paths = []
        for attachment in envelope.attachments:
            name = safe_filename(attachment.filename) or "attachment"
            try:
                data = attachment.to_bytes()
            except ValueError as exc:
                raise Refused(400, f"attachment {attachment.filename!r} is not base64: {exc}") from None
            await store.put(upload_key(self.target.owner, self.target.thread_id, name), data)
            paths.append(upload_path(name))
        listing = "\n".join(f"- {path}" for path in paths)
        return f"{envelope.prompt}\n\n[Files sent with this message, now in the sandbox:\n{listing}]".strip()

    async def _send_files(self, paths: list[str]) -> None:
        """The files the agent presented, as one `response` chunk's attachments (what fits a message)."""
        if not paths:
            return
        store = await self.host.bus.files()
        budget = self.host.bus.nc.max_payload * 3 // 4 - 4096  # base64 and the chunk's JSON
        attachments, too_big = [], []
        for path in paths:
            key = output_key(self.target.owner, self.target.thread_id, output_relative(path) or "")
            try:
                data = (await store.get(key)).data or b""
            except Exception as exc:
                log.warning("presented file %s is not in the object store: %s", key, exc)
                continue
            if len(data) > budget:
                too_big.append(path)
                continue
            budget -= len(data)
            attachments.append(Attachment.from_bytes(path.rsplit("/", 1)[-1], data))
        note = "".join(f"\n[{path}: too large to send here]" for path in too_big)
        if attachments or note:
            await self._chunk(ResponseChunk(text=note, attachments=attachments or None))

    async def _keepalive(self, reply: str) -> None:
        interval = self.host.config.agent_protocol.keepalive_seconds
        while True:
            await asyncio.sleep(interval)
            try:
                await self.host.bus.nc.request(reply, ACK, timeout=PROBE_TIMEOUT)
            except NoRespondersError:
                self._gone.set()
                return
            except (TimeoutError, NatsTimeout):
                pass  # there, and (as callers do) not answering a chunk
            except Exception as exc:
                log.debug("keep-alive on %s: %s", reply, exc)

    async def _until_gone(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not task.done():
            await cancel_and_wait(task)
            raise CallerGone()
        task.result()

    async def _cancel_run(self) -> None:
        if self.run_id is None:
            return
        try:  # running, or still waiting its turn (then marked so no runner starts it)
            await cancel_run(self.host.bus, self.run_id, reason="the protocol caller went away")
        except Exception as exc:
            log.warning("run %s of a caller gone away not cancelled: %s", self.run_id, exc)

    async def _chunk(self, chunk: ResponseChunk | StatusChunk | QueryChunk) -> None:
        await self._send(encode_chunk(chunk))

    async def _send(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        assert self.msg.reply
        await self.host.bus.nc.publish(self.msg.reply, data, headers=headers)

    async def _error(self, code: int, description: str) -> None:
        text = " | ".join(description.splitlines())[:200]  # one header line
        with contextlib.suppress(Exception):
            await self._send(b"", headers={ERROR_CODE: str(code), ERROR_TEXT: text})


async def create_thread(bus: Bus, target: Target) -> None:
    """Record the session's thread with its owner (its first run would create it, without the metadata)."""
    request = ThreadCreateRequest(
        thread_id=target.thread_id,
        user_id=target.owner,
        metadata={"agent_protocol": {"agent": target.agent, "session": target.session}},
    )
    try:
        await call(bus, "threads", "create", request, ThreadCreateReply, timeout=10)
    except ServiceError as exc:
        log.warning("thread %s of session %s not recorded yet: %s", target.thread_id, target.session, exc)
