"""A fake Slack on 127.0.0.1: the Web API (`/api/<method>`) and a Socket Mode WebSocket.

slack-bolt runs unmodified against it: `apps.connections.open` hands out the
WebSocket URL, the socket says `hello`, tests push `events_api` envelopes with
`send_event()`, and the app's acks and Web API calls are recorded in order.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from tests.fakes._server import LocalServer, Outbox

BOT_USER = "UBOT"
APP_TOKEN = "xapp-test"  # the app-level token apps.connections.open accepts


class FakeSlack(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.acks: list[str] = []
        self.uploads: dict[str, bytes] = {}
        self.outbox = Outbox(self.changed)
        self.connected = asyncio.Event()
        self.connections = 0
        self._dropped = asyncio.Event()
        self.app = FastAPI()
        self.app.post("/api/{method}")(self._api)
        self.app.post("/upload/{file_id}")(self._upload)
        self.app.websocket("/link")(self._socket)
        self.app.get("/files/{file_id}")(self._download)
        self.private_files: dict[str, bytes] = {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def _deliver(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = False,
        to: str | None = None,
    ) -> dict[str, Any]:
        """Put a Socket Mode envelope of `kind` in the outbox (for `to` alone, if given); returns it."""
        envelope = {
            "envelope_id": str(uuid.uuid4()),
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
        }
        self.outbox.put(envelope["envelope_id"], envelope, to=to)
        return envelope

    def send_event(self, event: dict[str, Any], *, to: str | None = None) -> dict[str, Any]:
        """Deliver an Events API event over a socket (`to` one client, `host:port`, if given); returns
        the envelope (`resend` it to retry)."""
        payload = {
            "token": "x",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": "Ev" + uuid.uuid4().hex[:10],
            "event_time": int(time.time()),
            "event": event,
        }
        return self._deliver("events_api", payload, to=to)

    def send_command(
        self, command: str, text: str = "", *, channel: str = "D1", user: str = "U1"
    ) -> dict[str, Any]:
        """A user running a slash command (`/status`), as Socket Mode delivers it; returns the envelope."""
        payload = {
            "token": "x",
            "team_id": "T1",
            "team_domain": "example",
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": "ana",
            "command": command,
            "text": text,
            "api_app_id": "A1",
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/commands/{uuid.uuid4().hex[:8]}",
            "trigger_id": f"{int(time.time())}.1.{uuid.uuid4().hex[:16]}",
        }
        return self._deliver("slash_commands", payload, accepts_response_payload=True)

    def press_button(self, value: str, *, channel: str = "D1", user: str = "U1") -> dict[str, Any]:
        """A user pressing a button (Block Kit `block_actions`) of the bot's message, as Socket Mode
        delivers it; `value` is the button's. Returns the envelope."""
        action_ts = f"{time.time():.6f}"
        payload = {
            "type": "block_actions",
            "team": {"id": "T1", "domain": "example"},
            "user": {"id": user, "username": "ana", "team_id": "T1"},
            "api_app_id": "A1",
            "token": "x",
            "trigger_id": f"{int(time.time())}.1.{uuid.uuid4().hex[:16]}",
            "channel": {"id": channel, "name": "directmessage" if channel.startswith("D") else "general"},
            "container": {"type": "message", "channel_id": channel, "message_ts": "1700000000.000200"},
            "message": {"type": "message", "ts": "1700000000.000200", "text": "(the reply with buttons)"},
            "actions": [
                {
                    "type": "button",
                    "action_id": "antler_command_1",
                    "block_id": "b1",
                    "value": value,
                    "action_ts": action_ts,
                    "text": {"type": "plain_text", "text": "pressed"},
                }
            ],
        }
        return self._deliver("interactive", payload)

    def share_file(self, name: str, data: bytes) -> dict[str, Any]:
        """A file object as Slack puts it in a message event; downloading it needs the bot token."""
        file_id = f"F{len(self.private_files) + 1}"
        self.private_files[file_id] = data
        url = f"http://127.0.0.1:{self.port}/files/{file_id}"
        return {
            "id": file_id,
            "name": name,
            "mimetype": "text/plain",
            "size": len(data),
            "url_private_download": url,
        }

    async def _download(self, file_id: str, request: Request) -> Any:
        from fastapi.responses import Response

        await self.held("download")
        if request.headers.get("authorization") != "Bearer xoxb-test":
            return Response(b"<html>login</html>", status_code=302, headers={"location": "/login"})
        return Response(self.private_files[file_id], media_type="text/plain")

    def resend(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Slack's retry of an event (as after no acknowledgement in time): a new envelope, the same
        event, to whichever connection; returns the new envelope."""
        again = {**envelope, "envelope_id": str(uuid.uuid4()), "retry_attempt": 1, "retry_reason": "timeout"}
        self.outbox.put(again["envelope_id"], again)
        return again

    async def _api(self, method: str, request: Request) -> Any:
        params = await _params(request)
        wait = self.flood.refusal(method, str(params.get("channel") or "") or None)
        if wait is not None:  # Web API rate limits (per channel for chat.postMessage): 429, Retry-After
            self.record(f"{method}:429", params)
            headers = {"Retry-After": str(wait)}
            return JSONResponse({"ok": False, "error": "ratelimited"}, 429, headers=headers)
        if self.broken(method):
            self.record(f"{method}:500", params)
            return JSONResponse({"ok": False, "error": "internal_error"}, 500)
        if method in ("chat.postMessage", "chat.update") and len(str(params.get("text") or "")) > 40_000:
            self.record(f"{method}:msg_too_long", params)
            return {"ok": False, "error": "msg_too_long"}
        self.record(method, params)
        if method == "apps.connections.open":
            if request.headers.get("authorization") != f"Bearer {APP_TOKEN}":
                return {"ok": False, "error": "invalid_auth"}
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}
        if method == "auth.test":
            return {"ok": True, "user_id": BOT_USER, "bot_id": "B1", "team_id": "T1", "user": "antler"}
        if method in ("chat.postMessage", "chat.update"):
            ts = params.get("ts") or f"{time.time():.6f}"
            params.setdefault("posted_ts", ts)  # the message's id, for tests (as recorded)
            await self.held(method)  # the platform has it; its answer is slow
            return {
                "ok": True,
                "channel": params.get("channel"),
                "ts": ts,
                "message": {"text": params.get("text")},
            }
        if method == "files.getUploadURLExternal":
            file_id = "F" + uuid.uuid4().hex[:8]
            return {
                "ok": True,
                "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}",
                "file_id": file_id,
            }
        if method == "files.completeUploadExternal":
            files = params.get("files")
            files = json.loads(files) if isinstance(files, str) else files
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in files or []]}
        return {"ok": True}

    async def _upload(self, file_id: str, request: Request) -> Any:
        form = await request.form() if "multipart" in request.headers.get("content-type", "") else None
        if form is not None:
            item = next(iter(form.values()))
            data = await item.read() if hasattr(item, "read") else str(item).encode()
        else:
            data = await request.body()
        self.uploads[file_id] = data
        return {"ok": True}

    async def _socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else "?"
        await websocket.send_text(json.dumps({"type": "hello", "num_connections": 1}))
        self.connected.set()

        async def send(envelope: dict[str, Any]) -> None:
            await websocket.send_text(json.dumps(envelope))

        sender = asyncio.create_task(self.outbox.serve(send, client))
        receiver = asyncio.create_task(self._acks(websocket, client))
        dropped = asyncio.create_task(self._dropped.wait())
        self.connections += 1
        try:
            await asyncio.wait({receiver, dropped}, return_when=asyncio.FIRST_COMPLETED)
            if dropped.done():  # the link broke: the client sees an abnormal close, as on network loss
                self._dropped.clear()
                await websocket.close(code=1011)
        finally:
            for task in (sender, receiver, dropped):
                task.cancel()

    async def _acks(self, websocket: WebSocket, client: str) -> None:
        try:
            while True:
                data = json.loads(await websocket.receive_text())
                if "envelope_id" in data:
                    self.acks.append(data["envelope_id"])
                    self.outbox.acked(client, data["envelope_id"])
                    self.changed()
        except (WebSocketDisconnect, RuntimeError):
            pass

    def drop_connection(self) -> None:
        self.connected.clear()
        self._dropped.set()


async def _params(request: Request) -> dict[str, Any]:
    """Parameters as slack_sdk sends them: query string, form or JSON body."""
    params: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = await request.json()
        params.update(body if isinstance(body, dict) else {})
    else:
        form = await request.form()
        params.update({key: value for key, value in form.multi_items()})
    return params
