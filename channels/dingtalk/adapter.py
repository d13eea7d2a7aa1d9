"""The DingTalk adapter: the Stream protocol in; Markdown, AI cards and files out.

Inbound: the app's Stream connection (`channels.dingtalk.stream`). Robot messages from
private ("1") and group ("2") conversations become InboundMessages, with the
pictures and files they carry downloaded into the object store; what the
adapter needs to answer (session webhook, conversation type, sender, robot
code) travels in the message's metadata and comes back with every reply, so
a restarted adapter can still answer.

Replies go through the shared reply stream (`channels.delivery.reply_stream`): with
`card_template_id` set, an AI card is created on the first partial answer
(`/v1.0/card/instances/createAndDeliver`), streamed into (`PUT
/v1.0/card/streaming`) and finished with the final text; without one, or if
the card cannot be created, the final answer is posted to the session webhook
as Markdown (through the robot API once the webhook has expired or refuses
it), in pieces that fit the robot's limit. A final reply with buttons (an approval request) is
an ActionCard whose buttons send their command as the presser's message
(`channels.dingtalk.buttons`). The session webhook answers failures as HTTP 200 with an
`errcode`; "send too fast" (130101) and HTTP 429 (`Retry-After`) are rate limits the reply
waits out. Presented files are uploaded (`/media/upload`) and sent with the robot API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import PurePosixPath
from typing import Any

import httpx
from dingtalk_stream.chatbot import ChatbotMessage

from bus import Bus, Misconfigured
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.delivery import standby
from channels.delivery.inbound import store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.splitting import split_text
from channels.delivery.standby import ReplyHandler
from channels.delivery.surface import Surface
from channels.dingtalk.api import DingTalkApi, DingTalkError, DingTalkUnavailable, retry_after
from channels.dingtalk.buttons import robot_card, webhook_card
from channels.dingtalk.stream import StreamConnection
from channels.errors import RateLimited
from config import AppConfig, DingTalkConfig

log = logging.getLogger(__name__)

OPEN_API = "https://api.dingtalk.com"
LEGACY_API = "https://oapi.dingtalk.com"  # media uploads still live on the old host
MAX_FILE_BYTES = 20 * 1024 * 1024  # what a robot may upload as a file
FINISHED, FAILED = "3", "5"  # AI card flow states
LIMIT = 5_000  # characters of Markdown per message
MAX_PARAM_BYTES = 15_000  # the robot API's limit for a message's msgParam (the webhook's is larger)
SEND_TOO_FAST = {130101, 130102}  # session webhook errcodes asking to slow down
TOO_FAST_WAIT = 2.0  # DingTalk says no more than "too fast"


def _param_bytes(text: str) -> int:
    return len(json.dumps({"title": text[:20], "text": text}, ensure_ascii=False).encode())


class DingTalkAdapter(Surface):
    def __init__(self, bus: Bus, config: DingTalkConfig) -> None:
        self.bus = bus
        self.config = config
        self.base = (config.base_url or OPEN_API).rstrip("/")
        self.legacy = (config.base_url or LEGACY_API).rstrip("/")
        self.webhooks: dict[str, tuple[str, float]] = {}  # conversation -> newest session webhook, expiry
        self.streams = bool(config.card_template_id)  # only an AI card shows an answer as it streams
        self.replies = ReplyStream(bus, "dingtalk", self)
        self.http = httpx.AsyncClient(timeout=30)
        self.api = DingTalkApi(config, self.http, self.base, self.legacy)
        self.stream = StreamConnection(bus, config, self.http, self.base, self._inbound)

    async def _inbound(self, message: ChatbotMessage) -> None:
        expires = (message.session_webhook_expired_time or 0) / 1000 or time.time() + 5400
        if message.session_webhook:
            self.webhooks[message.conversation_id] = (message.session_webhook, expires)
        content = (
            message.extensions.get("content") if isinstance(message.extensions.get("content"), dict) else {}
        )
        if message.message_type == "text":
            text = message.text.content if message.text else ""
        elif message.message_type == "richText":
            text = "".join(str(item.get("text") or "") for item in message.rich_text_content.rich_text_list)
        elif message.message_type == "audio":
            text = str(content.get("recognition") or "")  # DingTalk's own transcript
        else:
            text = ""
        files = await self._files_in(message, content)
        if not (text or "").strip() and not files:
            log.info("dingtalk: skipping a %s message with nothing to answer", message.message_type)
            return
        group = str(message.conversation_type) == "2"
        inbound = InboundMessage(
            channel="dingtalk",
            chat_id=message.conversation_id,
            user_id=message.sender_staff_id or message.sender_id or "unknown",
            user_name=message.sender_nick,
            message_id=message.message_id,
            chat_type="group" if group else "private",
            mentioned=bool(message.is_in_at_list),
            text=(text or "").strip(),
            files=files,
            metadata={
                "session_webhook": message.session_webhook,
                "session_webhook_expires": expires,
                "conversation_type": "2" if group else "1",
                "sender_staff_id": message.sender_staff_id,
                "robot_code": message.robot_code or self.config.resolved("client_id"),
            },
        )
        await store_inbound(self.bus, "dingtalk", inbound)

    async def _files_in(self, message: ChatbotMessage, content: dict[str, Any]) -> list[FileRef]:
        """Pictures and files of the message, fetched through the robot's download codes."""
        wanted: list[tuple[str, str]] = []  # (download code, file name)
        if message.message_type == "picture" and message.image_content:
            wanted.append((message.image_content.download_code, f"picture_{message.message_id[-8:]}.png"))
        elif message.message_type == "richText":
            for n, item in enumerate(message.rich_text_content.rich_text_list):
                if item.get("downloadCode"):
                    wanted.append((item["downloadCode"], f"picture_{message.message_id[-8:]}_{n}.png"))
        elif message.message_type in ("file", "video") and content.get("downloadCode"):
            wanted.append(
                (content["downloadCode"], str(content.get("fileName") or f"{message.message_type}"))
            )
        staged: list[FileRef] = []
        robot = message.robot_code or self.config.resolved("client_id")
        for code, name in wanted:
            try:
                found = await self.api.call(
                    "POST", "/v1.0/robot/messageFiles/download", {"downloadCode": code, "robotCode": robot}
                )
                response = await self.http.get(found["downloadUrl"])
                response.raise_for_status()
            except Exception as exc:
                log.warning("dingtalk: could not download %s: %s", name, exc)
                continue
            if len(response.content) > MAX_FILE_BYTES:
                log.info("dingtalk: skipping %s (%d bytes, over the limit)", name, len(response.content))
                continue
            store = await self.bus.files()
            content_type = response.headers.get("content-type", "").split(";")[0] or None
            staged.append(
                await stage_chat_file(
                    store,
                    "dingtalk",
                    message.conversation_id,
                    message.message_id,
                    name,
                    response.content,
                    content_type,
                )
            )
        return staged

    # ------------------------------------------------------------------ replies (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT, measure=_param_bytes, max_size=MAX_PARAM_BYTES)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """An AI card showing `text` (card mode), else the text as Markdown (with buttons, an
        ActionCard); a partial answer whose card cannot be created shows nothing (its final answer
        comes as Markdown)."""
        if self.config.card_template_id and out.run_id and not (out.buttons and out.is_final):
            track = await self._create_card(out)
            if track is not None:
                await self._stream_card(track, text, final=False, failed=False)
                return {"card": track}
            if out.kind == "partial":
                return {"pending": True}
        await self._markdown(out, text)
        return {"sent": True}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        if ref.get("card"):
            await self._stream_card(ref["card"], text, final=False, failed=False)

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        if ref.get("card"):
            failed = out.kind == "error"
            await self._stream_card(ref["card"], text, final=True, failed=failed)
            key = self.config.card_content_key
            await self.api.call(
                "PUT",
                "/v1.0/card/instances",
                {
                    "outTrackId": ref["card"],
                    "cardData": {"cardParamMap": {key: text, "flowStatus": FAILED if failed else FINISHED}},
                },
            )
            if out.buttons and out.is_final:  # an AI card has no buttons: they come below it
                await self._markdown(out, text)
        elif ref.get("pending"):
            await self._markdown(out, text)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        await self._markdown(out, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        await self._file_out(out, file, data)

    async def _create_card(self, out: OutboundMessage) -> str | None:
        """A new AI card for the run, or None when DingTalk refuses one (Markdown instead)."""
        track = f"antler-{out.run_id}"
        context = out.metadata
        group = context.get("conversation_type") != "1"
        robot = context.get("robot_code") or self.config.resolved("client_id")
        body: dict[str, Any] = {
            "cardTemplateId": self.config.card_template_id,
            "outTrackId": track,
            "callbackType": "STREAM",
            "cardData": {"cardParamMap": {self.config.card_content_key: "", "flowStatus": "1"}},
            "imGroupOpenSpaceModel": {"supportForward": True},
            "imRobotOpenSpaceModel": {"supportForward": True},
        }
        if group:
            body["openSpaceId"] = f"dtv1.card//IM_GROUP.{out.chat_id}"
            body["imGroupOpenDeliverModel"] = {"robotCode": robot}
        else:
            body["openSpaceId"] = f"dtv1.card//IM_ROBOT.{context.get('sender_staff_id')}"
            body["imRobotOpenDeliverModel"] = {"spaceType": "IM_ROBOT"}
        try:
            await self.api.call("POST", "/v1.0/card/instances/createAndDeliver", body)
        except DingTalkError as exc:
            log.warning("dingtalk: no AI card for run %s (%s); answering in Markdown", out.run_id, exc)
            return None
        return track

    async def _stream_card(self, track: str, text: str, *, final: bool, failed: bool) -> None:
        await self.api.call(
            "PUT",
            "/v1.0/card/streaming",
            {
                "outTrackId": track,
                "guid": str(uuid.uuid4()),
                "key": self.config.card_content_key,
                "content": text,
                "isFull": True,
                "isFinalize": final,
                "isError": failed,
            },
        )

    async def _markdown(self, out: OutboundMessage, text: str) -> None:
        """`text` as Markdown into the conversation: through its session webhook while that lasts and
        takes it, else through the robot API."""
        title = text.strip().splitlines()[0][:20] if text.strip() else "Reply"
        # The newest this copy saw, or the one the reply carries (another copy may have taken the
        # conversation's later messages): whichever lasts longer.
        webhook, expires = max(
            self.webhooks.get(out.chat_id) or ("", 0.0),
            (out.metadata.get("session_webhook"), float(out.metadata.get("session_webhook_expires") or 0)),
            key=lambda found: found[1],
        )
        card = webhook_card(out, title, text)  # a final reply's buttons: an ActionCard
        if webhook and expires > time.time() + 30:
            response = await self.http.post(
                webhook, json=card or {"msgtype": "markdown", "markdown": {"title": title, "text": text}}
            )
            if response.status_code == 429:
                raise RateLimited(retry_after(response, 2.0), "DingTalk session webhook rate limit")
            if response.status_code >= 500:
                raise DingTalkUnavailable(f"DingTalk's session webhook answered {response.status_code}")
            body = response.json() if response.status_code == 200 and response.content else {}
            code = body.get("errcode", 0) if isinstance(body, dict) else 0
            if response.status_code == 200 and code in (0, None):
                return
            if code in SEND_TOO_FAST:
                raise RateLimited(
                    retry_after(response, TOO_FAST_WAIT), f"DingTalk says {body.get('errmsg') or code}"
                )
            log.warning(
                "dingtalk: the session webhook refused a reply (%s); sending it with the robot API",
                f"errcode {code}: {body.get('errmsg')}" if code else response.status_code,
            )
        await self.api.robot_send(
            out, *(robot_card(out, title, text) or ("sampleMarkdown", {"title": title, "text": text}))
        )

    async def _file_out(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        if len(data) > MAX_FILE_BYTES:
            await self._markdown(out, f"({file.name} is too large to send here.)")
            return
        media_id = await self.api.upload(file.name, data, file.content_type)
        if media_id is None:
            await self._markdown(out, f"(I made {file.name}, but could not attach it.)")
            return
        suffix = PurePosixPath(file.name).suffix.lstrip(".").lower() or "file"
        await self.api.robot_send(
            out, "sampleFile", {"mediaId": media_id, "fileName": file.name, "fileType": suffix}
        )


async def run(bus: Bus, config: AppConfig) -> None:
    """The DingTalk adapter component: the stream in, replies out, until cancelled.

    Any number of copies may run: each opens its own Stream connection, DingTalk hands each robot
    message to one of them and sends it again if it is not acknowledged. A copy acknowledges a
    message only once the bus has it; one that reaches a second copy is the same message
    (`InboundMessage.dedupe_id`) and becomes no second run. One copy at a time delivers the
    replies (`channels.delivery.standby.deliver_replies_while_active`); what it needs to answer (the
    session webhook) travels with each reply."""
    settings = config.channels.dingtalk
    if not settings.resolved("client_id") or not settings.resolved("client_secret"):
        raise Misconfigured("channels.dingtalk.client_id and client_secret must be set")
    adapter = DingTalkAdapter(bus, settings)

    def new_replies() -> ReplyHandler:
        adapter.replies = ReplyStream(bus, "dingtalk", adapter)
        return adapter.replies.deliver

    stream = asyncio.create_task(adapter.stream.forever(), name="dingtalk-stream")
    try:
        await standby.deliver_replies_while_active(bus, "dingtalk", config.bus.lease_seconds, new_replies)
    finally:
        await cancel_and_wait(stream)
        await adapter.http.aclose()
