"""A fake DingTalk: the Stream gateway (connection open + WebSocket), session webhooks and the Open API.

Tests push robot messages with `send_robot_message()`; acks, pongs and the
Markdown replies posted to session webhooks are recorded in `replies`; Open
API calls (access token, AI cards, robot messages, file downloads and media
uploads) are recorded in order in `calls` as `(path, body)`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response

from tests.fakes._server import LocalServer, Outbox

TOPIC = "/v1.0/im/bot/messages/get"


class FakeDingTalk(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.acks: list[dict[str, Any]] = []
        self.replies: list[tuple[str, dict[str, Any]]] = []
        self.connections = 0
        self.outbox = Outbox(self.changed)
        self.webhook_errcodes: list[int] = []  # errcodes the next webhook posts answer (HTTP 200)
        self.webhook_refusals: list[tuple[str, dict[str, Any]]] = []
        self.app = FastAPI()
        self.app.post("/v1.0/gateway/connections/open")(self._open)
        self.app.websocket("/stream")(self._socket)
        self.app.post("/webhook/{conversation}")(self._webhook)
        self.app.post("/v1.0/oauth2/accessToken")(self._access_token)
        self.app.post("/v1.0/card/instances/createAndDeliver")(self._api)
        self.app.put("/v1.0/card/streaming")(self._api)
        self.app.put("/v1.0/card/instances")(self._api)
        self.app.post("/v1.0/robot/groupMessages/send")(self._api)
        self.app.post("/v1.0/robot/oToMessages/batchSend")(self._api)
        self.app.post("/v1.0/robot/messageFiles/download")(self._download_url)
        self.app.get("/download/{code}")(self._download)
        self.app.post("/media/upload")(self._upload)
        self.files: dict[str, tuple[bytes, str]] = {}  # download code -> (bytes, content type)
        self.uploads: dict[str, bytes] = {}  # media id -> bytes the robot uploaded
        self.refuse_cards = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def send_robot_message(
        self,
        text: str,
        *,
        conversation: str = "cid-1",
        group: bool = False,
        at_bot: bool = False,
        msg_id: str = "",
        msgtype: str = "text",
        content: dict[str, Any] | None = None,
        webhook_expired: bool = False,
        raw_data: str | None = None,
        to: str | None = None,
    ) -> dict[str, Any]:
        """A robot message down the stream (`raw_data` replaces its data, malformed as you like)."""
        data: dict[str, Any] = {
            "conversationId": conversation,
            "conversationType": "2" if group else "1",
            "msgId": msg_id or "msg" + uuid.uuid4().hex[:8],
            "msgtype": msgtype,
            "senderStaffId": "staff-7",
            "senderId": "$:LWCP_v1:$sender",
            "senderNick": "Ana",
            "isInAtList": at_bot,
            "sessionWebhook": f"{self.base_url}/webhook/{conversation}",
            "sessionWebhookExpiredTime": int(time.time() * 1000) + (-1000 if webhook_expired else 5_400_000),
            "robotCode": "robot-1",
            "chatbotUserId": "bot-1",
            "createAt": int(time.time() * 1000),
        }
        if msgtype == "text":
            data["text"] = {"content": text}
        if content is not None:
            data["content"] = content
        frame = {
            "specVersion": "1.0",
            "type": "CALLBACK",
            "headers": {"messageId": str(uuid.uuid4()), "topic": TOPIC, "contentType": "application/json"},
            "data": json.dumps(data) if raw_data is None else raw_data,
        }
        self.outbox.put(frame["headers"]["messageId"], frame, to=to)
        return frame

    def press_button(
        self, action_url: str, *, conversation: str = "cid-1", group: bool = False
    ) -> dict[str, Any]:
        """A person presses an ActionCard button linking `dtmd://dingtalkclient/sendMessage?content=`:
        the DingTalk client sends the content into the conversation as their message (to the robot)."""
        parsed = urlsplit(action_url)
        where = (parsed.scheme, parsed.netloc, parsed.path)
        assert where == ("dtmd", "dingtalkclient", "/sendMessage"), action_url
        [content] = parse_qs(parsed.query)["content"]
        return self.send_robot_message(content, conversation=conversation, group=group, at_bot=group)

    def send_frame(self, frame: Any) -> None:
        """Any JSON value as a frame (a text frame as is, if a str); one with a `messageId` header is
        sent again to another connection if its own closes before acknowledging it."""
        headers = frame.get("headers") if isinstance(frame, dict) else None
        frame_id = headers.get("messageId") if isinstance(headers, dict) else None
        lasting = isinstance(frame, dict) and frame.get("type") in ("CALLBACK", "EVENT") and bool(frame_id)
        self.outbox.put(str(frame_id or uuid.uuid4()), frame, lasting=lasting)

    def ping(self) -> str:
        message_id = str(uuid.uuid4())
        frame = {
            "type": "SYSTEM",
            "headers": {"messageId": message_id, "topic": "ping"},
            "data": '{"opaque": "x"}',
        }
        self.outbox.put(message_id, frame, lasting=False)
        return message_id

    def drop_connection(self) -> None:
        self.outbox.close_next()

    async def _open(self, request: Request) -> Any:
        body = await request.json()
        if body.get("clientId") != "ding-id" or body.get("clientSecret") != "ding-secret":
            return {"code": "InvalidAuthentication", "message": "bad credentials"}
        return {"endpoint": f"ws://127.0.0.1:{self.port}/stream", "ticket": "ticket-1"}

    async def _socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else "?"
        self.connections += 1
        self.changed()

        async def send(frame: Any) -> None:
            await websocket.send_text(frame if isinstance(frame, str) else json.dumps(frame))

        async def pump() -> None:
            await self.outbox.serve(send, client)
            await websocket.close()

        sender = asyncio.create_task(pump())
        try:
            while True:
                ack = json.loads(await websocket.receive_text())
                self.acks.append(ack)
                headers = ack.get("headers") if isinstance(ack, dict) else None
                if isinstance(headers, dict) and ack.get("code") == 200:  # else: DingTalk sends it again
                    self.outbox.acked(client, str(headers.get("messageId")))
                self.changed()
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            sender.cancel()

    async def _webhook(self, conversation: str, request: Request) -> Any:
        """A session webhook: failures are HTTP 200 with an errcode, as DingTalk answers them."""
        body = await request.json()
        if self.flood.refusal("webhook", conversation) is not None:
            # A robot may send a group 20 messages a minute; past that DingTalk refuses it for a while.
            self.webhook_refusals.append((conversation, body))
            self.record("webhook:130101", {"conversation": conversation, **body})
            return {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
        if self.webhook_errcodes:
            code = self.webhook_errcodes.pop(0)
            self.webhook_refusals.append((conversation, body))
            self.changed()
            return {"errcode": code, "errmsg": "send too fast" if code == 130101 else "refused"}
        if len(json.dumps(body, ensure_ascii=False).encode()) > 20_000:
            self.webhook_refusals.append((conversation, body))
            self.changed()
            return {"errcode": 460101, "errmsg": "message too long"}
        self.replies.append((conversation, body))
        self.record("webhook", {"conversation": conversation, **body})
        return {"errcode": 0, "errmsg": "ok"}

    def add_file(self, code: str, data: bytes, content_type: str) -> None:
        self.files[code] = (data, content_type)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("x-acs-dingtalk-access-token") == "ding-token"

    async def _access_token(self, request: Request) -> Any:
        body = await request.json()
        if body.get("appKey") != "ding-id" or body.get("appSecret") != "ding-secret":
            return JSONResponse({"code": "invalidClientId", "message": "bad credentials"}, status_code=400)
        return {"accessToken": "ding-token", "expireIn": 7200}

    async def _api(self, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": "InvalidAuthentication", "message": "token"}, status_code=401)
        body = await request.json()
        wait = self.flood.refusal(request.url.path)
        if wait is not None:
            self.record(f"{request.url.path}:429", body)
            return JSONResponse(
                {"code": "Forbidden.AccessDenied.QpsLimitForApi", "message": "too many requests"},
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
        if self.broken(request.url.path):
            self.record(f"{request.url.path}:500", body)
            return JSONResponse({"code": "ServiceUnavailable", "message": "try again"}, status_code=500)
        if len(str(body.get("msgParam") or "").encode()) > 15_000:
            self.record(f"{request.url.path}:too_long", body)
            return JSONResponse({"code": "param.invalid", "message": "msgParam is too long"}, status_code=400)
        self.record(request.url.path, body)
        self.changed()
        await self.held(request.url.path)  # the platform has it; its answer is slow
        if self.refuse_cards and request.url.path.startswith("/v1.0/card/"):
            return JSONResponse({"code": "param.invalid", "message": "no such template"}, status_code=400)
        return {"success": True, "result": {"outTrackId": body.get("outTrackId")}}

    async def _download_url(self, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": "InvalidAuthentication", "message": "token"}, status_code=401)
        body = await request.json()
        self.record(request.url.path, body)
        return {"downloadUrl": f"{self.base_url}/download/{body['downloadCode']}"}

    async def _download(self, code: str) -> Any:
        await self.held("download")
        data, content_type = self.files[code]
        return Response(data, media_type=content_type)

    async def _upload(self, request: Request) -> Any:
        if request.query_params.get("access_token") != "ding-token":
            return {"errcode": 40014, "errmsg": "invalid access_token"}
        form = await request.form()
        media = form["media"]
        media_id = f"@media{len(self.uploads) + 1}"
        self.uploads[media_id] = await media.read()  # type: ignore[union-attr]
        self.record(
            "/media/upload", {"type": form.get("type"), "filename": media.filename, "media_id": media_id}
        )  # type: ignore[union-attr]
        return {"errcode": 0, "errmsg": "ok", "media_id": media_id, "type": form.get("type")}
