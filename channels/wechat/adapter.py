"""The WeChat Official Account adapter: the account's callback URL in; passive replies and the
customer-service message API out.

Inbound: WeChat checks the callback URL with a GET (`signature`, a SHA-1 of the Token, timestamp and
nonce; answered with `echostr`) and posts each message as XML, in plain mode as is, in safe mode
encrypted (`encrypt_type=aes`, `msg_signature`; AES-256-CBC with the EncodingAESKey,
`wechatpy.crypto`). A request whose signature does not hold is refused with 403 and reaches nothing.
Text, pictures, links, locations and voice messages WeChat transcribed are read; a message that
cannot be read is dead-lettered with the reason (`antler dlq list`).

Replies: WeChat waits 5 seconds for a callback's answer and then sends the message again (three
times at most), so a callback waits `passive_reply_seconds` (4 s) for the answer: if it is ready by
then, the callback answers with it (a passive reply, encrypted in safe mode); otherwise the callback
answers `success` and the answer is sent through `message/custom/send` once ready (possible within
48 hours of the user's last message). Long answers continue in more messages (2,048 bytes each);
pictures the agent presents are uploaded (`media/upload`) and sent as images; an Official Account
cannot send other files, so those become a note.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from wechatpy.crypto import WeChatCrypto
from wechatpy.exceptions import InvalidSignatureException
from wechatpy.replies import TextReply
from wechatpy.utils import check_signature

from bus import Bus, Misconfigured
from bus.messages import OutboundMessage
from bus.tasks import wait_for
from channels.wechat.api import WeixinApi, WeixinError
from channels.wechat.base import CallbackAdapter, make_crypto, serve_standing_by
from channels.wechat.messages import CallbackMessage
from config import AppConfig
from config.channels import WeChatConfig

log = logging.getLogger(__name__)

API = "https://api.weixin.qq.com"
QUERY = ("signature", "timestamp", "nonce")
OUT_OF_WINDOW = 45015  # the user last wrote more than 48 hours ago: no customer-service message
SENT_WAIT = 10.0  # seconds a passive reply is given to leave before the next step goes on


@dataclass
class _Waiting:
    """A callback waiting for its message's answer, to reply with it passively."""

    answer: asyncio.Future[str]
    sent: asyncio.Event = field(default_factory=asyncio.Event)


class WeChatAdapter(CallbackAdapter):
    channel = "wechat"
    refused_credentials = (
        "WeChat refused the account's credentials ({errmsg}, errcode {code}): "
        "check channels.wechat.app_id and app_secret (and the server's IP allowlist)"
    )
    readable = "text or pictures"
    taken = "success"
    sends_files = False

    def __init__(self, bus: Bus, config: WeChatConfig) -> None:
        app_id, secret, token, key = _credentials(config)
        self.token = token
        self.crypto = make_crypto(WeChatCrypto, "wechat", token, key, app_id) if key else None
        self.config = config
        self._waiting: dict[str, _Waiting] = {}

        async def fetch_token(http: httpx.AsyncClient, base: str) -> httpx.Response:
            query = {"grant_type": "client_credential", "appid": app_id, "secret": secret}
            return await http.get(f"{base}/cgi-bin/token", params=query)

        http = httpx.AsyncClient(timeout=30)
        super().__init__(bus, WeixinApi(http, config.base_url or API, fetch_token, "WeChat"), http)

    # ------------------------------------------------------------------ the callback URL

    def _signed(self, request: Request) -> Response | None:
        """None if the request carries WeChat's signature; else the refusal."""
        query = request.query_params
        missing = [name for name in QUERY if not query.get(name)]
        if missing:
            return PlainTextResponse(f"missing query parameter {missing[0]}", status_code=400)
        try:
            check_signature(self.token, query["signature"], query["timestamp"], query["nonce"])
        except InvalidSignatureException:
            log.warning("wechat: refused a request whose signature does not hold")
            return PlainTextResponse("invalid signature", status_code=403)
        return None

    async def verify(self, request: Request) -> Response:
        """WeChat's URL check: `echostr` back, if the signature holds."""
        refused = self._signed(request)
        if refused is not None:
            return refused
        return PlainTextResponse(request.query_params.get("echostr", ""))

    async def receive(self, request: Request) -> Response:
        refused = self._signed(request)
        if refused is not None:
            return refused
        query = request.query_params
        body = await request.body()
        safe = query.get("encrypt_type", "raw").lower() == "aes"
        plain: bytes | str = body
        if safe:
            if self.crypto is None:
                await self.dead_letter(body, "an encrypted message, but no encoding_aes_key is set")
                return PlainTextResponse(self.taken)
            if not query.get("msg_signature"):
                return PlainTextResponse("missing query parameter msg_signature", status_code=400)
            decrypted = await self.decrypt(self.crypto, body, query)
            if isinstance(decrypted, Response):
                return decrypted
            plain = decrypted
        message = await self.read(plain)
        if isinstance(message, Response):
            return message
        note = await self.publish(message)  # fails with a 500: WeChat sends it again
        if note:
            return self._passive(message, note, query.get("nonce", ""), safe)
        if message.msg_type == "event" or self.config.passive_reply_seconds <= 0:
            return PlainTextResponse(self.taken)
        return await self._await_answer(message, query.get("nonce", ""), safe)

    async def _await_answer(self, message: CallbackMessage, nonce: str, safe: bool) -> Response:
        """The answer as the callback's reply if it is ready in time; `success` otherwise (the answer
        then goes through the customer-service API)."""
        waiting = _Waiting(asyncio.get_running_loop().create_future())
        self._waiting[message.ident] = waiting
        try:
            with contextlib.suppress(TimeoutError):
                await wait_for(asyncio.shield(waiting.answer), self.config.passive_reply_seconds)
        finally:
            self._waiting.pop(message.ident, None)
        if not waiting.answer.done():
            waiting.answer.cancel()  # `post` finds it gone and uses the API
            log.info("wechat: message %s not answered in time; the answer follows by API", message.ident)
            return PlainTextResponse(self.taken)
        return self._passive(message, waiting.answer.result(), nonce, safe, sent=waiting.sent)

    def _passive(
        self, message: CallbackMessage, text: str, nonce: str, safe: bool, sent: asyncio.Event | None = None
    ) -> Response:
        reply = TextReply(source=message.to_user, target=message.from_user, content=text).render()
        if safe and self.crypto is not None:
            reply = self.crypto.encrypt_message(reply, nonce)
        done = BackgroundTask(sent.set) if sent is not None else None
        return Response(reply, media_type="application/xml", background=done)

    # ------------------------------------------------------------------ replies

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """The answer's first piece: the waiting callback's reply if there is one, else by API."""
        waiting = self._waiting.get(out.reply_to or "")
        if waiting is not None and not waiting.answer.done():
            waiting.answer.set_result(text)
            try:  # what follows (more pieces, files) comes after it
                await wait_for(waiting.sent.wait(), SENT_WAIT)
            except TimeoutError:
                log.warning("wechat: the passive reply to %s did not leave in time", out.reply_to)
            return {"sent": True, "passive": True}
        await self.send_text(out.chat_id, text)
        return {"sent": True}

    async def send(self, user: str, kind: str, content: dict[str, Any]) -> None:
        body = {"touser": user, "msgtype": kind, kind: content}
        try:
            await self.api.call("POST", "/cgi-bin/message/custom/send", json=body)
        except WeixinError as exc:
            if exc.code == OUT_OF_WINDOW:
                log.warning("wechat: %s last wrote over 48 hours ago; WeChat takes no message now", user)
            raise


async def run(bus: Bus, config: AppConfig) -> None:
    """The WeChat Official Account adapter component: the callback URL in, replies out, until
    cancelled. One copy serves at a time (lease `adapter.wechat`; the others stand by and take the
    callback port over when it dies); WeChat's retries reach whichever serves, and a message already
    on the bus becomes no second run."""
    settings = config.channels.wechat
    app_id, _, token, key = _credentials(settings)  # a mistake is told before standing by
    if key:
        make_crypto(WeChatCrypto, "wechat", token, key, app_id)
    await serve_standing_by(bus, "wechat", config.bus.lease_seconds, WeChatAdapter, settings)


def _credentials(config: WeChatConfig) -> tuple[str, str, str, str | None]:
    """app_id, app_secret, token, encoding_aes_key (None: plain mode only); `Misconfigured` naming
    the ones not set."""
    values = {name: config.resolved(name) for name in ("app_id", "app_secret", "token")}
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise Misconfigured(f"channels.wechat: {', '.join(missing)} must be set")
    return values["app_id"], values["app_secret"], values["token"], config.resolved("encoding_aes_key")
