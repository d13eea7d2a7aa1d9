"""The WeCom (企业微信) adapter: a self-built app's callback URL in, the app message API out.

Inbound: WeCom checks the callback URL with a GET whose `echostr` is encrypted (answered with it
decrypted, once `msg_signature` holds) and posts each message encrypted (WXBizMsgCrypt: AES-256-CBC
with the EncodingAESKey, signed with the Token; `wechatpy.enterprise.crypto`). A request whose
signature does not hold is refused with 403 and reaches nothing. A message is answered at once with
an empty 200 (WeCom waits 5 seconds, then sends it again, three times at most): the answer goes
later through `message/send`. Text, pictures, files, links and locations are read; a message that
cannot be read is dead-lettered with the reason (`antler dlq list`).

Outbound: each user's chat is answered with text messages of at most 2,048 bytes (WeCom's limit)
through `message/send` with the app's access token (`gettoken`, cached; fetched again when WeCom
answers 40014/42001), files uploaded with `media/upload` and sent as images or files.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from wechatpy.enterprise.crypto import WeChatCrypto
from wechatpy.exceptions import InvalidSignatureException

from bus import Bus, Misconfigured
from channels.wechat.api import WeixinApi, WeixinError
from channels.wechat.base import CallbackAdapter, make_crypto, serve_standing_by
from channels.wechat.messages import CallbackMessage
from config import AppConfig
from config.channels import WeComConfig

log = logging.getLogger(__name__)

API = "https://qyapi.weixin.qq.com"
QUERY = ("msg_signature", "timestamp", "nonce")


class WeComAdapter(CallbackAdapter):
    channel = "wecom"
    refused_credentials = (
        "WeCom refused the app credentials ({errmsg}, errcode {code}): "
        "check channels.wecom.corp_id and secret"
    )
    readable = "text, pictures or files"

    def __init__(self, bus: Bus, config: WeComConfig) -> None:
        corp_id, secret, token, key = _credentials(config)
        self.crypto = make_crypto(WeChatCrypto, "wecom", token, key, corp_id)
        self.config = config
        self.agent_id = int(config.agent_id or 0)

        async def gettoken(http: httpx.AsyncClient, base: str) -> httpx.Response:
            return await http.get(
                f"{base}/cgi-bin/gettoken", params={"corpid": corp_id, "corpsecret": secret}
            )

        http = httpx.AsyncClient(timeout=30)
        super().__init__(bus, WeixinApi(http, config.base_url or API, gettoken, "WeCom"), http)

    # ------------------------------------------------------------------ the callback URL

    async def verify(self, request: Request) -> Response:
        """WeCom's URL check: the decrypted `echostr`, if the signature holds."""
        query = request.query_params
        missing = [name for name in (*QUERY, "echostr") if not query.get(name)]
        if missing:
            return PlainTextResponse(f"missing query parameter {missing[0]}", status_code=400)
        try:
            echo = self.crypto.check_signature(
                query["msg_signature"], query["timestamp"], query["nonce"], query["echostr"]
            )
        except InvalidSignatureException:
            log.warning("wecom: refused a URL check whose signature does not hold")
            return PlainTextResponse("invalid signature", status_code=403)
        except Exception as exc:  # cannot be decrypted with our key, or not for our company
            log.warning("wecom: refused a URL check: %s", exc)
            return PlainTextResponse("invalid echostr", status_code=403)
        return PlainTextResponse(echo)

    async def receive(self, request: Request) -> Response:
        query = request.query_params
        missing = [name for name in QUERY if not query.get(name)]
        if missing:
            return PlainTextResponse(f"missing query parameter {missing[0]}", status_code=400)
        plain = await self.decrypt(self.crypto, await request.body(), query)
        if isinstance(plain, Response):
            return plain
        message = await self.read(plain)
        if isinstance(message, Response):
            return message
        note = await self.publish(message)  # fails with a 500: WeCom sends it again
        if note:
            self.spawn(self.notify(message.from_user, note), f"wecom-note-{message.ident}")
        return PlainTextResponse("")

    def metadata(self, message: CallbackMessage) -> dict[str, Any]:
        return {"agent_id": message.agent_id} if message.agent_id else {}

    # ------------------------------------------------------------------ the app message API

    async def send(self, user: str, kind: str, content: dict[str, Any]) -> None:
        body = {"touser": user, "msgtype": kind, "agentid": self.agent_id, kind: content, "safe": 0}
        answer = await self.api.call("POST", "/cgi-bin/message/send", json=body)
        if answer.get("invaliduser"):
            raise WeixinError(0, f"not a member the app can reach: {answer['invaliduser']}", "message/send")


async def run(bus: Bus, config: AppConfig) -> None:
    """The WeCom adapter component: the callback URL in, replies out, until cancelled.

    One copy serves at a time (it holds the lease `adapter.wecom`; the others stand by and take the
    callback port over when it dies, `channels.delivery.standby`); WeCom's retries reach whichever
    serves, and a message already on the bus becomes no second run."""
    settings = config.channels.wecom
    corp_id, _, token, key = _credentials(settings)  # a mistake is told before standing by
    make_crypto(WeChatCrypto, "wecom", token, key, corp_id)
    await serve_standing_by(bus, "wecom", config.bus.lease_seconds, WeComAdapter, settings)


def _credentials(config: WeComConfig) -> tuple[str, str, str, str]:
    """corp_id, secret, token, encoding_aes_key; `Misconfigured` naming the ones not set."""
    values = {name: config.resolved(name) for name in ("corp_id", "secret", "token", "encoding_aes_key")}
    missing = [name for name, value in values.items() if not value]
    if not config.agent_id:
        missing.insert(1, "agent_id")
    if missing:
        raise Misconfigured(f"channels.wecom: {', '.join(missing)} must be set")
    return values["corp_id"], values["secret"], values["token"], values["encoding_aes_key"]
