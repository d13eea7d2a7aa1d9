"""A fake WeCom (企业微信) for a self-built app, written from WeCom's developer documentation: the
token (`gettoken`), the app message API (`message/send`, its `errcode`s and the 2,048-byte text
limit), temporary media, and the platform's side of the callback URL (the URL check with an
encrypted `echostr`; messages posted encrypted and signed).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
from fastapi import Request, Response
from fastapi.responses import JSONResponse

from tests.fakes._weixin import FakeWeixin, MessageCipher, new_aes_key, nonce, now, signature, xml_of

TEXT_BYTES = 2048


class FakeWeCom(FakeWeixin):
    def __init__(self) -> None:
        super().__init__()
        self.corp_id = "ww" + uuid.uuid4().hex[:16]
        self.secret = "app-secret"
        self.agent_id = 1000002
        self.callback_token = "cb-token"
        self.aes_key = new_aes_key()
        self.cipher = MessageCipher(self.aes_key, self.corp_id)
        self.sent: list[dict[str, Any]] = []  # message/send bodies WeCom took, in order
        self._msg_ids = 0
        self.app.add_api_route("/cgi-bin/gettoken", self._gettoken, methods=["GET"])
        self.app.add_api_route("/cgi-bin/message/send", self._send, methods=["POST"])

    def settings(self, port: int, path: str = "/wecom/callback") -> dict[str, Any]:
        """The adapter's config section for this fake, its callback served on `port`."""
        ours = {"corp_id": self.corp_id, "agent_id": self.agent_id, "secret": self.secret}
        return {**ours, **self._callback_settings(port, path)}

    # ------------------------------------------------------------------ the APIs

    async def _gettoken(self, request: Request) -> Response:
        query = request.query_params
        self.record("gettoken", dict(query))
        if query.get("corpid") != self.corp_id:
            return self.refuse("gettoken", 40013, "invalid corpid")
        if query.get("corpsecret") != self.secret:
            return self.refuse("gettoken", 40001, "invalid credential")
        return JSONResponse({"errcode": 0, "errmsg": "ok", **self.issue_token()})

    async def _send(self, request: Request) -> Response:
        refused = self.token_refusal(request, "message/send")
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            return self.refuse("message/send", 47001, "data format error")
        if body.get("agentid") != self.agent_id:
            return self.refuse("message/send", 40056, "invalid agentid")
        kind = body.get("msgtype")
        if kind == "text":
            content = (body.get("text") or {}).get("content")
            if not content:
                return self.refuse("message/send", 41009, "missing text content")
            if len(content.encode()) > TEXT_BYTES:
                return self.refuse("message/send", 45002, "content size out of limit")
        elif kind in ("image", "file"):
            if (body.get(kind) or {}).get("media_id") not in self.media:
                return self.refuse("message/send", 40007, "invalid media_id")
        else:
            return self.refuse("message/send", 40008, "invalid message type")
        seconds = self.flood.refusal("message/send")
        if seconds is not None:
            return self.refuse("message/send", 45009, "api freq out of limit")
        self.sent.append(body)
        self.record("message/send", body)
        return JSONResponse({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": uuid.uuid4().hex})

    def texts(self, user: str | None = None) -> list[str]:
        return [
            s["text"]["content"] for s in self.sent if s["msgtype"] == "text" and user in (None, s["touser"])
        ]

    # ------------------------------------------------------------------ the platform's side

    def message_xml(self, msg_type: str = "text", user: str = "zhangsan", **fields: Any) -> tuple[str, str]:
        """A user's message to the app as WeCom writes it, and its MsgId."""
        self._msg_ids += 1
        msg_id = str(fields.pop("MsgId", 7_000_000_000_000_000_000 + self._msg_ids))
        xml = xml_of(
            {
                "ToUserName": self.corp_id,
                "FromUserName": user,
                "CreateTime": int(time.time()),
                "MsgType": msg_type,
                **fields,
                "MsgId": msg_id,
                "AgentID": self.agent_id,
            }
        )
        return xml, msg_id

    async def deliver(self, plain_xml: str, *, forged: bool = False) -> httpx.Response:
        """Post a message to the app's callback URL, encrypted and signed as WeCom does."""
        encrypted = self.cipher.encrypt(plain_xml)
        timestamp, once = now(), nonce()
        sig = signature(self.callback_token if not forged else "not-the-token", timestamp, once, encrypted)
        body = xml_of({"ToUserName": self.corp_id, "AgentID": self.agent_id, "Encrypt": encrypted})
        return await self.post_callback({"msg_signature": sig, "timestamp": timestamp, "nonce": once}, body)

    async def send_text(self, text: str, user: str = "zhangsan", **fields: Any) -> tuple[httpx.Response, str]:
        xml, msg_id = self.message_xml("text", user, Content=text, **fields)
        return await self.deliver(xml), msg_id

    async def check_url(self, *, forged: bool = False) -> tuple[httpx.Response, str]:
        """WeCom's check of the callback URL: a GET with an encrypted random `echostr`."""
        echo = uuid.uuid4().hex
        encrypted = self.cipher.encrypt(echo)
        timestamp, once = now(), nonce()
        sig = signature(self.callback_token if not forged else "nope", timestamp, once, encrypted)
        params = {"msg_signature": sig, "timestamp": timestamp, "nonce": once, "echostr": encrypted}
        return await self.get_callback(params), echo
