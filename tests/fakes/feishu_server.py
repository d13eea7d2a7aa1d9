"""A fake Feishu open platform on 127.0.0.1: the long-connection gateway and the IM REST API.

lark-oapi runs unmodified against it. `POST /callback/ws/endpoint` hands out the
WebSocket URL and client settings; the socket carries protobuf frames
(`pbbp2.Frame`): tests push `im.message.receive_v1` events with
`send_message()`, the client's acknowledgements and pings are recorded, pings
are answered with pongs. REST calls (tenant token, bot info, messages sent,
replied, patched, resources downloaded, images and files uploaded) are recorded
in order as `(method path, parameters)`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from lark_oapi.ws.pb.pbbp2_pb2 import Frame

from tests.fakes._server import LocalServer, Outbox

APP_ID, APP_SECRET = "cli_test", "secret-test"
BOT_OPEN_ID = "ou_bot"
TOKEN = "t-tenant-token"


def _headers(frame: Frame) -> dict[str, str]:
    return {h.key: h.value for h in frame.headers}


class FakeFeishu(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.acks: list[dict[str, Any]] = []  # {"message_id", "code"} per acknowledged event frame
        self.pings = 0
        self.connections = 0
        self.uploads: dict[str, bytes] = {}  # image or file key -> bytes the bot uploaded
        self.resources: dict[str, tuple[bytes, str, str]] = {}  # key -> (bytes, content type, name)
        self.refuse_credentials = False
        self.outbox = Outbox(self.changed)
        self._messages = 0
        self.api_peers: list[tuple[str, int]] = []  # (path, client port) of each call with a token
        self.message_chats: dict[str, str] = {}  # users' message ids -> their chat (whom a reply goes to)
        self.app = FastAPI()
        self.app.post("/callback/ws/endpoint")(self._endpoint)
        self.app.websocket("/ws")(self._socket)
        self.app.post("/open-apis/auth/v3/tenant_access_token/internal")(self._token)
        self.app.get("/open-apis/bot/v3/info")(self._bot)
        self.app.post("/open-apis/im/v1/messages")(self._create)
        self.app.post("/open-apis/im/v1/messages/{message_id}/reply")(self._reply)
        self.app.patch("/open-apis/im/v1/messages/{message_id}")(self._patch)
        self.app.get("/open-apis/im/v1/messages/{message_id}/resources/{key}")(self._resource)
        self.app.post("/open-apis/im/v1/images")(self._image)
        self.app.post("/open-apis/im/v1/files")(self._file)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ what tests drive

    def send_message(
        self,
        text: str = "",
        *,
        chat_id: str = "oc_chat1",
        chat_type: str = "p2p",
        message_id: str = "",
        mention_bot: bool = False,
        thread_id: str = "",
        parent_id: str = "",
        message_type: str = "text",
        content: dict[str, Any] | str | None = None,
        event_id: str = "",
        to: str | None = None,
    ) -> dict[str, Any]:
        """Push an `im.message.receive_v1` event down a socket (`to` one client, `host:port`, if
        given); returns it (send it again to retry)."""
        mentions = []
        if mention_bot:
            text = "@_user_1 " + text
            mentions.append(
                {"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "Antler", "tenant_key": "tk"}
            )
        message_id = message_id or "om_" + uuid.uuid4().hex[:12]
        self.message_chats[message_id] = chat_id
        event = {
            "schema": "2.0",
            "header": {
                "event_id": event_id or uuid.uuid4().hex,
                "event_type": "im.message.receive_v1",
                "create_time": str(int(time.time() * 1000)),
                "token": "",
                "app_id": APP_ID,
                "tenant_key": "tk",
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": "ou_ana", "union_id": "on_ana", "user_id": "ana"},
                    "sender_type": "user",
                    "tenant_key": "tk",
                },
                "message": {
                    "message_id": message_id,
                    "root_id": thread_id and "om_root",
                    "parent_id": parent_id,
                    "thread_id": thread_id,
                    "create_time": str(int(time.time() * 1000)),
                    "chat_id": chat_id,
                    "chat_type": chat_type,
                    "message_type": message_type,
                    "content": content
                    if isinstance(content, str)  # as is: a test's malformed content
                    else json.dumps(content if content is not None else {"text": text}),
                    "mentions": mentions,
                },
            },
        }
        self.send_event(event, to=to)
        return event

    def press_button(
        self,
        value: dict[str, Any],
        *,
        chat_id: str = "oc_chat1",
        open_id: str = "ou_ana",
        message_id: str = "",
    ) -> dict[str, Any]:
        """A person presses a button of a card: a `card.action.trigger` event (card callbacks,
        version 2) with the button's `value`, down the long connection; returns it."""
        event = {
            "schema": "2.0",
            "header": {
                "event_id": uuid.uuid4().hex,
                "event_type": "card.action.trigger",
                "create_time": str(int(time.time() * 1000)),
                "token": "",
                "app_id": APP_ID,
                "tenant_key": "tk",
            },
            "event": {
                "operator": {"tenant_key": "tk", "user_id": "ana", "open_id": open_id, "union_id": "on_ana"},
                "token": "c-" + uuid.uuid4().hex,
                "action": {"value": value, "tag": "button"},
                "host": "im_message",
                "context": {"open_message_id": message_id, "open_chat_id": chat_id},
            },
        }
        self.send_event(event)
        return event

    def buttons(self) -> list[dict[str, Any]]:
        """The buttons of every card sent, replied or patched, in order."""
        found = []
        for _, params in self.calls:
            if params.get("msg_type", "interactive") == "interactive" and "content" in params:
                for element in json.loads(params["content"]).get("elements", [])[1:]:
                    found += element.get("actions", []) if element.get("tag") == "action" else []
        return found

    def send_event(self, event: dict[str, Any], *, to: str | None = None) -> str:
        """Any event JSON as a data frame; returns the frame's message id."""
        frame = Frame()
        frame.SeqID, frame.LogID, frame.service, frame.method = 1, 1, 1, 1  # method 1: data
        frame_id = str(uuid.uuid4())
        for key, value in (
            ("type", "event"),
            ("message_id", frame_id),
            ("trace_id", "tr"),
            ("sum", "1"),
            ("seq", "0"),
        ):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = json.dumps(event).encode()
        self.outbox.put(frame_id, frame.SerializeToString(), to=to)
        return frame_id

    def add_resource(self, key: str, data: bytes, content_type: str, name: str = "") -> None:
        self.resources[key] = (data, content_type, name)

    def drop_connection(self) -> None:
        self.outbox.close_next()

    def limit_chat(self, chat_id: str, seconds: float) -> None:
        """The next message sent into `chat_id` trips Feishu's per-chat send limit (code 230020, no
        reset header): it and every message into that chat for `seconds` are refused."""
        self.flood.arm("send", seconds, key=chat_id)

    def cards(self) -> list[tuple[str, str]]:
        """(call, markdown) of every card sent, replied or patched, in order."""
        found = []
        for call, params in self.calls:
            if params.get("msg_type", "interactive") == "interactive" and "content" in params:
                content = json.loads(params["content"])
                if "elements" in content:
                    found.append((call, content["elements"][0]["content"]))
        return found

    # ------------------------------------------------------------------ long connection

    async def _endpoint(self, request: Request) -> Any:
        body = await request.json()
        if self.broken("endpoint"):  # `break_method("endpoint", n)`: Feishu busy, the client retries
            return JSONResponse({"code": 1, "msg": "system busy"}, 503)
        if self.refuse_credentials or body.get("AppID") != APP_ID or body.get("AppSecret") != APP_SECRET:
            return {"code": 1000040343, "msg": "app credentials are invalid"}
        return {
            "code": 0,
            "data": {
                "URL": f"ws://127.0.0.1:{self.port}/ws?device_id=d1&service_id=7",
                "ClientConfig": {
                    "ReconnectCount": -1,
                    "ReconnectInterval": 1,
                    "ReconnectNonce": 0,
                    "PingInterval": 30,
                },
            },
        }

    async def _socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else "?"
        self.connections += 1
        self.changed()

        async def pump() -> None:
            await self.outbox.serve(websocket.send_bytes, client)
            await websocket.close()

        sender = asyncio.create_task(pump())
        try:
            while True:
                frame = Frame()
                frame.ParseFromString(await websocket.receive_bytes())
                headers = _headers(frame)
                if frame.method == 0 and headers.get("type") == "ping":
                    self.pings += 1
                    pong = Frame()
                    pong.CopyFrom(frame)
                    pong.headers[0].value = "pong"
                    await websocket.send_bytes(pong.SerializeToString())
                elif frame.method == 1:
                    answer = json.loads(frame.payload or b"{}")
                    self.acks.append({"message_id": headers.get("message_id"), "code": answer.get("code")})
                    if answer.get("code") == 200:  # anything else: Feishu pushes it again (here: later)
                        self.outbox.acked(client, str(headers.get("message_id")))
                self.changed()
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            sender.cancel()

    # ------------------------------------------------------------------ REST

    def _authorized(self, request: Request) -> bool:
        self.api_peers.append((request.url.path, request.client.port if request.client else 0))
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    def _refused(self, call: str, params: dict[str, Any]) -> Any | None:
        """Feishu's refusals: its frequency limit (HTTP 429, code 99991400, and how long until the
        limit resets in `x-ogw-ratelimit-reset`), server errors, and cards over 30 KB."""
        wait = self.flood.refusal(call)
        if wait is not None:
            self.record(f"{call}:429", params)
            headers = {"x-ogw-ratelimit-limit": "5", "x-ogw-ratelimit-reset": str(wait)}
            body = {"code": 99991400, "msg": "request trigger frequency limit"}
            return JSONResponse(body, status_code=429, headers=headers)
        if self.broken(call):
            self.record(f"{call}:500", params)
            return JSONResponse({"code": 1500, "msg": "internal error"}, status_code=500)
        if len(str(params.get("content") or "").encode()) > 30 * 1024:
            self.record(f"{call}:too_long", params)
            return JSONResponse({"code": 230025, "msg": "message content is too long"}, status_code=400)
        return None

    def _message(self, call: str, params: dict[str, Any]) -> Any:
        if (refusal := self._refused(call, params)) is not None:
            return refusal
        chat = params.get("receive_id") or self.message_chats.get(str(params.get("reply_to")))
        if chat and self.flood.refusal("send", str(chat)) is not None:
            # Messages into one user's or group's chat are limited (5 a second); HTTP 400 as Feishu's
            # business errors are, with no hint how long to wait.
            self.record(f"{call}:230020", params)
            return JSONResponse(
                {"code": 230020, "msg": "This operation triggers the frequency limit"}, status_code=400
            )
        self._messages += 1
        message_id = f"om_bot{self._messages}"
        self.record(call, {**params, "message_id": message_id})
        self.changed()
        return {
            "code": 0,
            "msg": "success",
            "data": {"message_id": message_id, "msg_type": params.get("msg_type")},
        }

    async def _token(self, request: Request) -> Any:
        body = await request.json()
        if self.refuse_credentials or body.get("app_id") != APP_ID or body.get("app_secret") != APP_SECRET:
            return {"code": 10014, "msg": "app secret invalid"}
        return {"code": 0, "msg": "ok", "tenant_access_token": TOKEN, "expire": 7200}

    async def _bot(self, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": 99991663, "msg": "invalid token"}, status_code=400)
        return {"code": 0, "msg": "ok", "bot": {"app_name": "Antler", "open_id": BOT_OPEN_ID}}

    async def _create(self, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": 99991663, "msg": "invalid token"}, status_code=400)
        params = {**await request.json(), "receive_id_type": request.query_params.get("receive_id_type")}
        answer = self._message("create", params)
        await self.held("create")  # the platform has it; its answer is slow
        return answer

    async def _reply(self, message_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": 99991663, "msg": "invalid token"}, status_code=400)
        answer = self._message("reply", {**await request.json(), "reply_to": message_id})
        await self.held("reply")  # the platform has it; its answer is slow
        return answer

    async def _patch(self, message_id: str, request: Request) -> Any:
        if not self._authorized(request):
            return JSONResponse({"code": 99991663, "msg": "invalid token"}, status_code=400)
        params = {**await request.json(), "message_id": message_id}
        if (refusal := self._refused("patch", params)) is not None:
            return refusal
        self.record("patch", params)
        self.changed()
        return {"code": 0, "msg": "success", "data": {}}

    async def _resource(self, message_id: str, key: str, request: Request) -> Any:
        await self.held("resource")
        if not self._authorized(request):
            return JSONResponse({"code": 99991663, "msg": "invalid token"}, status_code=400)
        self.record(
            "resource", {"message_id": message_id, "key": key, "type": request.query_params.get("type")}
        )
        if key not in self.resources:
            return JSONResponse({"code": 234003, "msg": "file not found"}, status_code=400)
        data, content_type, name = self.resources[key]
        disposition = {"content-disposition": f'attachment; filename="{name}"'} if name else {}
        return Response(data, media_type=content_type, headers=disposition)

    async def _image(self, request: Request) -> Any:
        form = await request.form()
        key = f"img_{len(self.uploads) + 1}"
        self.uploads[key] = await form["image"].read()  # type: ignore[union-attr]
        self.record("image", {"image_type": form.get("image_type"), "image_key": key})
        return {"code": 0, "msg": "success", "data": {"image_key": key}}

    async def _file(self, request: Request) -> Any:
        form = await request.form()
        key = f"file_{len(self.uploads) + 1}"
        self.uploads[key] = await form["file"].read()  # type: ignore[union-attr]
        self.record(
            "file", {"file_type": form.get("file_type"), "file_name": form.get("file_name"), "file_key": key}
        )
        return {"code": 0, "msg": "success", "data": {"file_key": key}}
