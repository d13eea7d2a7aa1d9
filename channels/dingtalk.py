"""The DingTalk adapter: the Stream protocol in; Markdown, AI cards and files out.

The Stream protocol is small, and the SDK's client blocks on `requests`, reads
its endpoint at import time and swallows cancellation, so this adapter runs its
own async loop with the SDK's message classes: open a connection
(`/v1.0/gateway/connections/open`), read frames from the WebSocket, ack each,
answer pings, reconnect with backoff when the socket drops. Robot messages from
private ("1") and group ("2") conversations become InboundMessages, with the
pictures and files they carry downloaded into the object store; what the
adapter needs to answer (session webhook, conversation type, sender, robot
code) travels in the message's metadata and comes back with every reply, so
a restarted adapter can still answer.

Replies: with `card_template_id` set, an AI card is created on the first
partial answer (`/v1.0/card/instances/createAndDeliver`), streamed into
(`PUT /v1.0/card/streaming`) and finished with the final text; without one,
or if the card cannot be created, the final answer is posted to the session
webhook as Markdown (through the robot API once the webhook has expired).
Presented files are uploaded (`/media/upload`) and sent with the robot API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote_plus

import httpx
import websockets
from dingtalk_stream.chatbot import ChatbotMessage
from dingtalk_stream.frames import AckMessage, CallbackMessage, SystemMessage

from bus import Bus, Delivery, Retry, run_consumers
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from channels.live import LiveReplies, reply_consumer
from config import AppConfig, DingTalkConfig

log = logging.getLogger(__name__)

OPEN_API = "https://api.dingtalk.com"
LEGACY_API = "https://oapi.dingtalk.com"  # media uploads still live on the old host
BOT_TOPIC = ChatbotMessage.TOPIC
MAX_FILE_BYTES = 20 * 1024 * 1024  # what a robot may upload as a file
FINISHED, FAILED = "3", "5"  # AI card flow states


class DingTalkError(RuntimeError):
    pass


class DingTalkAdapter:
    def __init__(self, bus: Bus, config: DingTalkConfig) -> None:
        self.bus = bus
        self.config = config
        self.base = (config.base_url or OPEN_API).rstrip("/")
        self.legacy = (config.base_url or LEGACY_API).rstrip("/")
        self.webhooks: dict[str, tuple[str, float]] = {}  # conversation -> newest session webhook, expiry
        self.cards = LiveReplies(bus, "dingtalk")  # run id -> the AI card streamed into
        self.http = httpx.AsyncClient(timeout=30)
        self._token: tuple[str, float] | None = None

    # ------------------------------------------------------------------ the stream

    async def stream_forever(self) -> None:
        delay = 1.0
        while True:
            try:
                await self._stream_once()
                delay = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # network loss, a refused ticket: try again, a little later each time
                log.warning("dingtalk: stream dropped (%s); reconnecting in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _stream_once(self) -> None:
        response = await self.http.post(
            f"{self.base}/v1.0/gateway/connections/open",
            json={
                "clientId": self.config.resolved("client_id"),
                "clientSecret": self.config.resolved("client_secret"),
                "subscriptions": [{"type": "CALLBACK", "topic": BOT_TOPIC}],
                "ua": "antler",
            },
        )
        response.raise_for_status()
        connection = response.json()
        uri = f"{connection['endpoint']}?ticket={quote_plus(connection['ticket'])}"
        async with websockets.connect(uri) as socket:
            log.info("dingtalk: stream connected")
            async for raw in socket:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    log.warning("dingtalk: unreadable frame skipped")
                    continue
                ack = await self._frame(frame)
                if ack is not None:
                    await socket.send(json.dumps(ack))
                if (
                    frame.get("type") == SystemMessage.TYPE
                    and frame.get("headers", {}).get("topic") == "disconnect"
                ):
                    return

    async def _frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        headers = frame.get("headers") or {}
        ack = AckMessage()
        ack.headers.message_id = headers.get("messageId")
        ack.headers.content_type = "application/json"
        if frame.get("type") == SystemMessage.TYPE:
            if headers.get("topic") == "ping":
                ack.data = json.loads(frame.get("data") or "{}")
                return ack.to_dict()
            return None
        if frame.get("type") != CallbackMessage.TYPE or headers.get("topic") != BOT_TOPIC:
            log.info("dingtalk: skipping a %s frame on %s", frame.get("type"), headers.get("topic"))
            return ack.to_dict()
        try:
            await self._inbound(ChatbotMessage.from_dict(json.loads(frame.get("data") or "{}")))
            ack.data = {"response": "OK"}
        except Exception:  # a message we cannot handle is logged and acked, never fatal
            log.exception("dingtalk: could not handle a robot message")
            ack.code = AckMessage.STATUS_SYSTEM_EXCEPTION
        return ack.to_dict()

    async def _inbound(self, message: ChatbotMessage) -> None:
        if not message.conversation_id or not message.message_id:
            return
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
        await self.bus.publish(self.bus.subjects.chat_in("dingtalk"), inbound, msg_id=inbound.dedupe_id())

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
                found = await self._api(
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

    # ------------------------------------------------------------------ the Open API

    async def _access_token(self) -> str:
        if self._token is None or self._token[1] < time.monotonic():
            response = await self.http.post(
                f"{self.base}/v1.0/oauth2/accessToken",
                json={
                    "appKey": self.config.resolved("client_id"),
                    "appSecret": self.config.resolved("client_secret"),
                },
            )
            body = response.json() if response.content else {}
            if response.status_code != 200 or not body.get("accessToken"):
                raise DingTalkError(
                    f"DingTalk refused the app credentials: {body.get('message') or response.status_code}"
                )
            self._token = (body["accessToken"], time.monotonic() + int(body.get("expireIn") or 7200) - 300)
        return self._token[0]

    async def _api(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"x-acs-dingtalk-access-token": await self._access_token()}
        response = await self.http.request(method, f"{self.base}{path}", json=body, headers=headers)
        if response.status_code == 429 or response.status_code >= 500:
            raise Retry(f"DingTalk answered {response.status_code} to {path}", delay=2.0)
        if response.status_code == 401:
            self._token = None
            raise Retry(f"DingTalk refused the access token for {path}", delay=0.5)
        if response.status_code >= 400:
            raise DingTalkError(f"DingTalk refused {path} ({response.status_code}): {response.text[:200]}")
        return response.json() if response.content else {}

    async def _robot_send(self, out: OutboundMessage, msg_key: str, param: dict[str, Any]) -> None:
        """A message from the robot into the conversation, without a session webhook."""
        context = out.metadata
        robot = context.get("robot_code") or self.config.resolved("client_id")
        body: dict[str, Any] = {
            "robotCode": robot,
            "msgKey": msg_key,
            "msgParam": json.dumps(param, ensure_ascii=False),
        }
        if context.get("conversation_type") == "1" and context.get("sender_staff_id"):
            await self._api(
                "POST", "/v1.0/robot/oToMessages/batchSend", {**body, "userIds": [context["sender_staff_id"]]}
            )
        else:
            await self._api(
                "POST", "/v1.0/robot/groupMessages/send", {**body, "openConversationId": out.chat_id}
            )

    # ------------------------------------------------------------------ replies

    async def on_outbound(self, out: OutboundMessage, delivery: Delivery) -> None:
        if self.config.card_template_id and out.run_id:
            if await self._card(out):
                await self._files_out(out)
                return
        if out.kind == "partial":
            return  # markdown replies are sent once, when final
        await self._markdown(out, out.text or "(empty reply)")
        await self._files_out(out)
        if self.config.card_template_id and out.run_id:
            await self.cards.drop(out.run_id)  # forget a card that could not be created

    async def _card(self, out: OutboundMessage) -> bool:
        """Stream the answer into the run's AI card; False when there is no card to use."""
        assert out.run_id is not None
        key = self.config.card_content_key
        live = await self.cards.get(out.run_id)
        if live is not None and live.get("failed"):
            return False  # this run's card could not be created: Markdown instead
        track = live["track"] if live is not None else ""
        if not track:
            track = f"antler-{out.run_id}"
            context = out.metadata
            group = context.get("conversation_type") != "1"
            robot = context.get("robot_code") or self.config.resolved("client_id")
            body: dict[str, Any] = {
                "cardTemplateId": self.config.card_template_id,
                "outTrackId": track,
                "callbackType": "STREAM",
                "cardData": {"cardParamMap": {key: "", "flowStatus": "1"}},
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
                await self._api("POST", "/v1.0/card/instances/createAndDeliver", body)
            except DingTalkError as exc:
                log.warning("dingtalk: no AI card for run %s (%s); answering in Markdown", out.run_id, exc)
                await self.cards.put(out.run_id, failed=True)
                return False
            await self.cards.put(out.run_id, track=track)
        final = out.kind != "partial"
        failed = out.kind == "error"
        text = out.text or ("" if not final else "(empty reply)")
        await self._api(
            "PUT",
            "/v1.0/card/streaming",
            {
                "outTrackId": track,
                "guid": str(uuid.uuid4()),
                "key": key,
                "content": text,
                "isFull": True,
                "isFinalize": final,
                "isError": failed,
            },
        )
        if final:
            status = FAILED if failed else FINISHED
            await self._api(
                "PUT",
                "/v1.0/card/instances",
                {"outTrackId": track, "cardData": {"cardParamMap": {key: text, "flowStatus": status}}},
            )
            await self.cards.drop(out.run_id)
        return True

    async def _markdown(self, out: OutboundMessage, text: str) -> None:
        title = text.strip().splitlines()[0][:20] if text.strip() else "Reply"
        webhook, expires = self.webhooks.get(out.chat_id) or (
            out.metadata.get("session_webhook"),
            float(out.metadata.get("session_webhook_expires") or 0),
        )
        if not webhook or expires < time.time() + 30:
            await self._robot_send(out, "sampleMarkdown", {"title": title, "text": text})
            return
        response = await self.http.post(
            webhook, json={"msgtype": "markdown", "markdown": {"title": title, "text": text}}
        )
        if response.status_code == 429 or response.status_code >= 500:
            raise Retry(f"DingTalk answered {response.status_code}", delay=2.0)
        if response.status_code >= 400:
            log.warning("dingtalk: reply refused (%d): %s", response.status_code, response.text[:200])

    async def _files_out(self, out: OutboundMessage) -> None:
        if out.kind == "partial":
            return
        for file in out.files:
            if not file.object_name:
                continue
            try:
                data = (await (await self.bus.files()).get(file.object_name)).data or b""
            except Exception as exc:
                log.warning("dingtalk: file %s is not in the object store: %s", file.object_name, exc)
                continue
            if len(data) > MAX_FILE_BYTES:
                await self._markdown(out, f"({file.name} is too large to send here.)")
                continue
            token = await self._access_token()
            response = await self.http.post(
                f"{self.legacy}/media/upload?access_token={quote_plus(token)}",
                data={"type": "file"},
                files={"media": (file.name, data, file.content_type or "application/octet-stream")},
            )
            body = response.json() if response.content else {}
            if (
                response.status_code != 200
                or body.get("errcode") not in (0, None)
                or not body.get("media_id")
            ):
                log.warning(
                    "dingtalk: could not upload %s: %s", file.name, body.get("errmsg") or response.status_code
                )
                await self._markdown(out, f"(I made {file.name}, but could not attach it.)")
                continue
            suffix = PurePosixPath(file.name).suffix.lstrip(".").lower() or "file"
            await self._robot_send(
                out, "sampleFile", {"mediaId": body["media_id"], "fileName": file.name, "fileType": suffix}
            )


async def run(bus: Bus, config: AppConfig) -> None:
    """The DingTalk adapter component: the stream in, replies out, until cancelled."""
    settings = config.channels.dingtalk
    if not settings.resolved("client_id") or not settings.resolved("client_secret"):
        raise ValueError("channels.dingtalk.client_id and client_secret must be set")
    adapter = DingTalkAdapter(bus, settings)
    outbound = reply_consumer(bus, "dingtalk", adapter.on_outbound)
    stream = asyncio.create_task(adapter.stream_forever(), name="dingtalk-stream")
    try:
        await run_consumers(outbound)
    finally:
        stream.cancel()
        await asyncio.gather(stream, return_exceptions=True)
        await adapter.http.aclose()
