"""A fake Telegram Bot API on 127.0.0.1, for python-telegram-bot pointed at it with `base_url`.

It speaks the real wire format: `POST /bot<token>/<method>` with form or JSON
parameters, `{"ok": true, "result": ...}` answers, long-polled `getUpdates`.
Tests push user messages with `send_user_message()` and read what the bot did
from `calls` (method, parameters) in order.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import time
from collections import Counter
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.fakes._server import LocalServer

BOT = {"id": 999, "is_bot": True, "first_name": "Antler", "username": "antler_bot"}


class FakeTelegram(LocalServer):
    def __init__(self, token: str = "123:TEST") -> None:
        super().__init__()
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._new_update = asyncio.Event()
        self.app = FastAPI()
        self.app.post("/bot{token}/{method}")(self._method)
        self.app.get("/file/bot{token}/{path:path}")(self._download)
        self.files: dict[str, bytes] = {}
        self.outage = False
        self.polls = 0
        self.polling = 0  # getUpdates calls being answered now
        self.conflicts = 0  # getUpdates calls refused because another was being answered
        self.deliveries: Counter[int] = Counter()  # update id -> times getUpdates returned it
        self.rate_limits: dict[str, int] = {}  # method -> how many more calls answer 429
        self.retry_after = 1
        self.failing_downloads = 0  # how many more file downloads answer 502
        self.downloads = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def send_user_message(self, text: str, **fields: Any) -> dict[str, Any]:
        """Queue an update as if a user wrote to the bot (fields as for `make_update`); returns it
        (resend it to simulate a retry)."""
        update = self.make_update(text, **fields)
        self.updates.append(update)
        self._new_update.set()
        return update

    def press_button(self, callback_data: str, *, chat_id: int = 42, user_id: int = 7) -> dict[str, Any]:
        """Queue a `callback_query` update, as if the user pressed an inline button carrying
        `callback_data` under one of the bot's messages; returns it."""
        update = {
            "update_id": next(self._update_ids),
            "callback_query": {
                "id": f"cb{next(self._message_ids)}",
                "from": {"id": user_id, "is_bot": False, "first_name": "Ana"},
                "message": self._message(chat_id, "(the message with the button)"),
                "chat_instance": f"ci{chat_id}",
                "data": callback_data,
            },
        }
        self.updates.append(update)
        self._new_update.set()
        return update

    def make_update(
        self,
        text: str,
        *,
        chat_id: int = 42,
        user_id: int = 7,
        chat_type: str = "private",
        entities: list[dict[str, Any]] | None = None,
        update_id: int | None = None,
        sender: dict[str, Any] | None = None,
        edited: bool = False,
        **fields: Any,
    ) -> dict[str, Any]:
        """An update as Telegram would deliver it (by polling or to a webhook). `sender` replaces
        the user in `from`; `fields` are set on the message (a sticker instead of text: `text=None,
        sticker={...}`); `edited` makes it an `edited_message` update."""
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {
                "id": chat_id,
                "type": chat_type,
                **({"title": "Group"} if chat_type != "private" else {}),
            },
            "from": sender or {"id": user_id, "is_bot": False, "first_name": "Ana"},
            "text": text,
        }
        if entities:
            message["entities"] = entities
        message.update(fields)
        message = {key: value for key, value in message.items() if value is not None}
        if edited:
            message["edit_date"] = int(time.time())
        kind = "edited_message" if edited else "message"
        return {"update_id": update_id or next(self._update_ids), kind: message}

    def send_user_document(
        self, name: str, data: bytes, caption: str = "", *, chat_id: int = 42
    ) -> dict[str, Any]:
        """A user sending a file (with an optional caption)."""
        file_id = f"doc{len(self.files) + 1}"
        self.files[file_id] = data
        update = self.send_user_message(caption, chat_id=chat_id)
        message = update["message"]
        message.pop("text")
        if caption:
            message["caption"] = caption
        message["document"] = {
            "file_id": file_id,
            "file_unique_id": "u" + file_id,
            "file_name": name,
            "mime_type": "text/plain",
            "file_size": len(data),
        }
        return update

    async def _download(self, token: str, path: str) -> Any:
        from fastapi.responses import Response

        self.downloads += 1
        if self.failing_downloads:  # the file server has a bad moment
            self.failing_downloads -= 1
            return Response(b"Bad Gateway", status_code=502)
        return Response(self.files.get(path.rsplit("/", 1)[-1], b""), media_type="application/octet-stream")

    def rate_limit(self, method: str, times: int, retry_after: int = 1) -> None:
        """The next `times` calls of `method` answer 429 with `retry_after` (Telegram's flood control)."""
        self.rate_limits[method] = times
        self.retry_after = retry_after

    def push(self, update: dict[str, Any]) -> None:
        """Deliver an update built with `make_update` (and changed as a test needs)."""
        self.updates.append(update)
        self._new_update.set()

    def resend(self, update: dict[str, Any]) -> None:
        """The same user message delivered again in a new update (a retry the adapter must absorb)."""
        self.updates.append({**update, "update_id": next(self._update_ids)})
        self._new_update.set()

    def _message(self, chat_id: Any, text: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": int(chat_id), "type": "private"},
            "from": BOT,
            **({"text": text} if text is not None else {}),
            **extra,
        }

    async def _method(self, token: str, method: str, request: Request) -> Any:
        if token != self.token:
            return JSONResponse({"ok": False, "error_code": 401, "description": "Unauthorized"}, 401)
        params = await _params(request)
        if method == "getUpdates":
            self.polls += 1
            if self.outage:  # the network between bot and Telegram is down
                return JSONResponse({"ok": False, "error_code": 502, "description": "Bad Gateway"}, 502)
            if self.polling:  # as Telegram: one poller per bot
                self.conflicts += 1
                description = "Conflict: terminated by other getUpdates request"
                return JSONResponse({"ok": False, "error_code": 409, "description": description}, 409)
            self.polling += 1
            try:
                return {"ok": True, "result": await self._get_updates(params)}
            finally:
                self.polling -= 1
        flood = self.flood.refusal(method, str(params.get("chat_id", "")) or None)
        if self.rate_limits.get(method, 0) > 0 or flood is not None:
            if flood is None:
                self.rate_limits[method] -= 1
            self.record(f"{method}:429", params)
            wait = flood or self.retry_after
            return JSONResponse(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": f"Too Many Requests: retry after {wait}",
                    "parameters": {"retry_after": wait},
                },
                429,
            )
        if self.broken(method):
            self.record(f"{method}:502", params)
            return JSONResponse({"ok": False, "error_code": 502, "description": "Bad Gateway"}, 502)
        text = params.get("text")
        if method in ("sendMessage", "editMessageText") and text is not None and len(str(text)) > 4096:
            # Telegram counts the text after parsing entities; our rendered tags make this stricter.
            visible = re.sub(r"<[^>]+>", "", str(text)) if params.get("parse_mode") == "HTML" else str(text)
            if len(html.unescape(visible).encode("utf-16-le")) // 2 > 4096:
                self.record(f"{method}:400", params)
                return JSONResponse(
                    {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}, 400
                )
        self.record(method, params)
        if method == "getFile":
            file_id = str(params.get("file_id"))
            size = len(self.files.get(file_id, b""))
            return {
                "ok": True,
                "result": {
                    "file_id": file_id,
                    "file_unique_id": "u" + file_id,
                    "file_size": size,
                    "file_path": f"documents/{file_id}",
                },
            }
        if method == "getMe":
            return {"ok": True, "result": BOT}
        if method in ("sendMessage", "editMessageText"):
            result = self._message(params.get("chat_id"), str(params.get("text")))
            if method == "editMessageText":
                result["message_id"] = int(params["message_id"])
            params["sent_message_id"] = result["message_id"]  # what the bot was told it sent
            return {"ok": True, "result": result}
        if method == "sendPhoto":
            photo = [{"file_id": "p1", "file_unique_id": "up1", "width": 1, "height": 1}]
            return {"ok": True, "result": self._message(params.get("chat_id"), photo=photo)}
        if method == "sendDocument":
            document = {
                "file_id": "f1",
                "file_unique_id": "u1",
                "file_name": params.get("document_name", "file"),
            }
            return {"ok": True, "result": self._message(params.get("chat_id"), document=document)}
        return {"ok": True, "result": True}

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        wait = min(float(params.get("timeout") or 0), 0.5)  # short polls keep shutdowns quick
        deadline = time.monotonic() + wait
        while True:
            ready = [u for u in self.updates if u["update_id"] >= offset]
            if ready or time.monotonic() >= deadline:
                # Delivered updates are confirmed by the next offset; keep the unconfirmed ones.
                self.updates = ready
                self.deliveries.update(u["update_id"] for u in ready)
                return ready
            self._new_update.clear()
            try:
                await asyncio.wait_for(self._new_update.wait(), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                pass


async def _params(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").startswith("application/json"):
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    form = await request.form()
    params: dict[str, Any] = {}
    for key, value in form.multi_items():
        if hasattr(value, "read"):  # an uploaded file
            params[key] = await value.read()
            params[f"{key}_name"] = value.filename
            continue
        try:
            params[key] = json.loads(value)
        except (TypeError, ValueError):
            params[key] = value
    return params
