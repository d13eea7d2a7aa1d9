"""A fake WeChat for an Official Account, written from the Official Accounts documentation: the
access token (`token`), the customer-service message API (`message/custom/send`: its 48-hour
window, `errcode`s and text limit), temporary media (images, not files), and the platform's side of
the callback URL (the URL check; messages posted plain or, in safe mode, encrypted; the 5-second
wait for a passive reply, which it reads and, in safe mode, decrypts and checks).
"""

from __future__ import annotations

import json
import time
import uuid
import xml.etree.ElementTree as ET
from typing import Any

import httpx
from fastapi import Request, Response
from fastapi.responses import JSONResponse

from tests.fakes._weixin import FakeWeixin, MessageCipher, new_aes_key, nonce, now, signature, xml_of

TEXT_BYTES = 2048
WINDOW = 48 * 3600  # customer-service messages: within 48 hours of the user's last message
PASSIVE_WAIT = 5.0  # WeChat waits this long for a callback's answer, then tries again


class FakeWeChat(FakeWeixin):
    upload_types = ("image", "voice", "video", "thumb")  # an Official Account cannot send other files

    def __init__(self) -> None:
        super().__init__()
        self.app_id = "wx" + uuid.uuid4().hex[:16]
        self.app_secret = "oa-secret"
        self.account = "gh_" + uuid.uuid4().hex[:12]  # the account's original id (ToUserName)
        self.callback_token = "oa-token"
        self.aes_key = new_aes_key()
        self.cipher = MessageCipher(self.aes_key, self.app_id)
        self.sent: list[dict[str, Any]] = []  # customer-service messages WeChat took, in order
        self.passive: list[dict[str, str]] = []  # passive replies read from callback answers
        self.last_message: dict[str, float] = {}  # openid -> when they last wrote to the account
        self._msg_ids = 0
        self.app.add_api_route("/cgi-bin/token", self._token, methods=["GET"])
        self.app.add_api_route("/cgi-bin/message/custom/send", self._custom_send, methods=["POST"])

    def settings(self, port: int, path: str = "/wechat/callback", **more: Any) -> dict[str, Any]:
        return {
            "app_id": self.app_id,
            "app_secret": self.app_secret,
            **self._callback_settings(port, path),
            **more,
        }

    # ------------------------------------------------------------------ the APIs

    async def _token(self, request: Request) -> Response:
        query = request.query_params
        self.record("token", dict(query))
        if query.get("grant_type") != "client_credential":
            return self.refuse("token", 40002, "invalid grant_type")
        if query.get("appid") != self.app_id:
            return self.refuse("token", 40013, "invalid appid")
        if query.get("secret") != self.app_secret:
            return self.refuse("token", 40125, "invalid appsecret")
        return JSONResponse(self.issue_token())

    async def _custom_send(self, request: Request) -> Response:
        path = "message/custom/send"
        refused = self.token_refusal(request, path)
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            return self.refuse(path, 47001, "data format error")
        user = body.get("touser")
        if user not in self.last_message:
            return self.refuse(path, 40003, "invalid openid")
        if time.time() - self.last_message[user] > WINDOW:
            return self.refuse(path, 45015, "response out of time limit or subscription is canceled")
        kind = body.get("msgtype")
        if kind == "text":
            content = (body.get("text") or {}).get("content") or ""
            if not content:
                return self.refuse(path, 44003, "empty news data")
            if len(content.encode()) > TEXT_BYTES:
                return self.refuse(path, 45002, "content size out of limit")
        elif kind == "image":
            if (body.get("image") or {}).get("media_id") not in self.media:
                return self.refuse(path, 40007, "invalid media_id")
        else:
            return self.refuse(path, 40008, "invalid message type")
        if self.flood.refusal(path) is not None:
            return self.refuse(path, 45047, "out of response count limit")
        self.sent.append(body)
        self.record(path, body)
        return JSONResponse({"errcode": 0, "errmsg": "ok"})

    def texts(self) -> list[str]:
        return [s["text"]["content"] for s in self.sent if s["msgtype"] == "text"]

    # ------------------------------------------------------------------ the platform's side

    def message_xml(self, msg_type: str = "text", user: str = "o-user-1", **fields: Any) -> tuple[str, str]:
        """A user's message to the account as WeChat writes it, and its MsgId."""
        self._msg_ids += 1
        msg_id = str(fields.pop("MsgId", 23_000_000_000_000_000 + self._msg_ids))
        xml = xml_of(
            {
                "ToUserName": self.account,
                "FromUserName": user,
                "CreateTime": int(time.time()),
                "MsgType": msg_type,
                **fields,
                "MsgId": msg_id,
            }
        )
        return xml, msg_id

    async def deliver(
        self, plain_xml: str, *, user: str = "o-user-1", safe: bool = False, forged: bool = False
    ) -> httpx.Response:
        """Post a message to the account's callback URL as WeChat does (encrypted in safe mode);
        a passive reply in the answer is read into `passive`."""
        self.last_message[user] = time.time()
        timestamp, once = now(), nonce()
        token = self.callback_token if not forged else "not-the-token"
        params = {
            "signature": signature(token, timestamp, once),
            "timestamp": timestamp,
            "nonce": once,
            "openid": user,
        }
        body = plain_xml
        if safe:
            encrypted = self.cipher.encrypt(plain_xml)
            params |= {"encrypt_type": "aes", "msg_signature": signature(token, timestamp, once, encrypted)}
            body = xml_of({"ToUserName": self.account, "Encrypt": encrypted})
        answer = await self.post_callback(params, body, timeout=PASSIVE_WAIT)
        if answer.status_code == 200 and answer.text not in ("", "success"):
            self.passive.append(self._read_reply(answer.text, safe))
            self.changed()
        return answer

    def _read_reply(self, text: str, safe: bool) -> dict[str, str]:
        fields = {child.tag: child.text or "" for child in ET.fromstring(text)}
        if safe:
            expected = signature(self.callback_token, fields["TimeStamp"], fields["Nonce"], fields["Encrypt"])
            assert fields["MsgSignature"] == expected, "the encrypted reply's signature does not hold"
            fields = {
                child.tag: child.text or "" for child in ET.fromstring(self.cipher.decrypt(fields["Encrypt"]))
            }
        return fields

    async def send_text(self, text: str, *, user: str = "o-user-1", safe: bool = False) -> httpx.Response:
        xml, _ = self.message_xml("text", user, Content=text)
        return await self.deliver(xml, user=user, safe=safe)

    async def check_url(self, *, forged: bool = False) -> tuple[httpx.Response, str]:
        echo = uuid.uuid4().hex
        timestamp, once = now(), nonce()
        token = self.callback_token if not forged else "nope"
        params = {"signature": signature(token, timestamp, once), "timestamp": timestamp, "nonce": once}
        return await self.get_callback({**params, "echostr": echo}), echo
