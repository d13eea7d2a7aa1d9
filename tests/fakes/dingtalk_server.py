"""A fake DingTalk: the Stream gateway (connection open + WebSocket) and session webhooks.

Tests push robot messages with `send_robot_message()`; acks, pongs and the
Markdown replies posted to session webhooks are recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect

from tests.fakes._server import LocalServer

TOPIC = "/v1.0/im/bot/messages/get"


class FakeDingTalk(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.acks: list[dict[str, Any]] = []
        self.replies: list[tuple[str, dict[str, Any]]] = []
        self.connections = 0
        self._frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._changed = asyncio.Event()
        self.app = FastAPI()
        self.app.post("/v1.0/gateway/connections/open")(self._open)
        self.app.websocket("/stream")(self._socket)
        self.app.post("/webhook/{conversation}")(self._webhook)

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
    ) -> dict[str, Any]:
        data = {
            "conversationId": conversation,
            "conversationType": "2" if group else "1",
            "msgId": msg_id or "msg" + uuid.uuid4().hex[:8],
            "msgtype": "text",
            "text": {"content": text},
            "senderStaffId": "staff-7",
            "senderId": "$:LWCP_v1:$sender",
            "senderNick": "Ana",
            "isInAtList": at_bot,
            "sessionWebhook": f"{self.base_url}/webhook/{conversation}",
            "sessionWebhookExpiredTime": int(time.time() * 1000) + 5_400_000,
            "robotCode": "robot-1",
            "chatbotUserId": "bot-1",
            "createAt": int(time.time() * 1000),
        }
        frame = {
            "specVersion": "1.0",
            "type": "CALLBACK",
            "headers": {"messageId": str(uuid.uuid4()), "topic": TOPIC, "contentType": "application/json"},
            "data": json.dumps(data),
        }
        self._frames.put_nowait(frame)
        return frame

    def ping(self) -> str:
        message_id = str(uuid.uuid4())
        frame = {
            "type": "SYSTEM",
            "headers": {"messageId": message_id, "topic": "ping"},
            "data": '{"opaque": "x"}',
        }
        self._frames.put_nowait(frame)
        return message_id

    def drop_connection(self) -> None:
        self._frames.put_nowait(None)

    async def wait(self, condition: Any, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    async def _open(self, request: Request) -> Any:
        body = await request.json()
        if body.get("clientId") != "ding-id" or body.get("clientSecret") != "ding-secret":
            return {"code": "InvalidAuthentication", "message": "bad credentials"}
        return {"endpoint": f"ws://127.0.0.1:{self.port}/stream", "ticket": "ticket-1"}

    async def _socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        self.connections += 1
        self._changed.set()

        async def pump() -> None:
            while (frame := await self._frames.get()) is not None:
                await websocket.send_text(json.dumps(frame))
            await websocket.close()

        sender = asyncio.create_task(pump())
        try:
            while True:
                self.acks.append(json.loads(await websocket.receive_text()))
                self._changed.set()
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            sender.cancel()

    async def _webhook(self, conversation: str, request: Request) -> Any:
        self.replies.append((conversation, await request.json()))
        self._changed.set()
        return {"errcode": 0, "errmsg": "ok"}
