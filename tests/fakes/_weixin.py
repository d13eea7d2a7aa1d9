"""What the fake WeCom and fake WeChat share, written from Tencent's documentation (not from any SDK):
the callback encryption, access tokens with their error codes, temporary media.

Encryption ("消息加解密", the same for WeCom and for an Official Account's safe mode): the AES key is
the Base64 decoding of `EncodingAESKey + "="` (32 bytes), AES-256-CBC with the key's first 16 bytes
as the IV; the plaintext is 16 random bytes, the message's length in 4 bytes (network order), the
message, then the receiver's id (CorpID or AppID), PKCS#7-padded to a multiple of 32 bytes; the
result travels in Base64. The signature is the SHA-1 of the token, timestamp, nonce (and, for an
encrypted message, the ciphertext) sorted and joined.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import secrets
import struct
import time
import uuid
from typing import Any

import httpx
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from tests.fakes._server import LocalServer

EXPIRED, INVALID = 42001, 40014  # access_token expired / invalid access_token


def signature(*parts: str) -> str:
    return hashlib.sha1("".join(sorted(parts)).encode()).hexdigest()


class MessageCipher:
    """The platforms' message encryption for one receiver (CorpID or AppID)."""

    def __init__(self, encoding_aes_key: str, receiver: str) -> None:
        self.key = base64.b64decode(encoding_aes_key + "=")
        self.receiver = receiver

    def _cipher(self) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16]))

    def encrypt(self, text: str) -> str:
        message = text.encode()
        plain = os.urandom(16) + struct.pack(">I", len(message)) + message + self.receiver.encode()
        pad = 32 - len(plain) % 32
        plain += bytes([pad]) * pad
        encryptor = self._cipher().encryptor()
        return base64.b64encode(encryptor.update(plain) + encryptor.finalize()).decode()

    def decrypt(self, encrypted: str) -> str:
        decryptor = self._cipher().decryptor()
        plain = decryptor.update(base64.b64decode(encrypted)) + decryptor.finalize()
        plain = plain[: -plain[-1]]
        (length,) = struct.unpack(">I", plain[16:20])
        message, receiver = plain[20 : 20 + length], plain[20 + length :]
        assert receiver.decode() == self.receiver, f"encrypted for {receiver!r}, not {self.receiver!r}"
        return message.decode()


def new_aes_key() -> str:
    """An EncodingAESKey: 43 characters of Base64 (32 bytes without the trailing `=`)."""
    return base64.b64encode(os.urandom(32)).decode().rstrip("=")


class FakeWeixin(LocalServer):
    """Access tokens and temporary media as both platforms serve them; subclasses add the message
    APIs and the callbacks. `calls` holds `(path, parameters)`; `refusals` `(path, errcode)`."""

    token_path = "/cgi-bin/token"

    def __init__(self) -> None:
        super().__init__()
        self.app = FastAPI()
        self.tokens: dict[str, bool] = {}  # token -> still valid
        self.media: dict[str, tuple[str, str, bytes]] = {}  # media id -> (type, name, bytes)
        self.refusals: list[tuple[str, int]] = []
        self.callback_url = ""  # the adapter's callback URL (the test sets it)
        self.app.add_api_route("/cgi-bin/media/upload", self._upload, methods=["POST"])
        self.app.add_api_route("/cgi-bin/media/get", self._media_get, methods=["GET"])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _callback_settings(self, port: int, path: str) -> dict[str, Any]:
        """What both adapters' config sections hold of their callback (served on `port` at `path`)
        and of this fake; the test's callbacks go to that URL from now on."""
        self.callback_url = f"http://127.0.0.1:{port}{path}"
        return {
            "token": self.callback_token,
            "encoding_aes_key": self.aes_key,
            "webhook_path": path,
            "webhook_port": port,
            "base_url": self.base_url,
        }

    # ------------------------------------------------------------------ tokens

    def issue_token(self) -> dict[str, Any]:
        token = secrets.token_urlsafe(24)
        self.tokens[token] = True
        return {"access_token": token, "expires_in": 7200}

    def expire_tokens(self) -> None:
        """Every token handed out so far has expired (as after two hours, or a newer one was fetched)."""
        for token in self.tokens:
            self.tokens[token] = False

    def refuse(self, path: str, code: int, errmsg: str) -> JSONResponse:
        self.refusals.append((path, code))
        self.changed()
        return JSONResponse({"errcode": code, "errmsg": errmsg})

    def token_refusal(self, request: Request, path: str) -> JSONResponse | None:
        token = request.query_params.get("access_token", "")
        if token not in self.tokens:
            return self.refuse(path, INVALID, "invalid access_token")
        if not self.tokens[token]:
            return self.refuse(path, EXPIRED, "access_token expired")
        return None

    # ------------------------------------------------------------------ media

    def add_media(self, kind: str, name: str, data: bytes) -> str:
        media_id = f"media-{uuid.uuid4().hex[:12]}"
        self.media[media_id] = (kind, name, data)
        return media_id

    upload_types = ("image", "voice", "video", "file")

    async def _upload(self, request: Request) -> Response:
        refused = self.token_refusal(request, "media/upload")
        if refused is not None:
            return refused
        kind = request.query_params.get("type", "")
        if kind not in self.upload_types:
            return self.refuse("media/upload", 40004, "invalid media type")
        form = await request.form()
        media = form.get("media")
        if media is None or isinstance(media, str):
            return self.refuse("media/upload", 41005, "media data missing")
        data = await media.read()
        media_id = self.add_media(kind, media.filename or "media", data)
        self.record("media/upload", {"type": kind, "name": media.filename, "media_id": media_id})
        return JSONResponse(
            {
                "errcode": 0,
                "errmsg": "ok",
                "type": kind,
                "media_id": media_id,
                "created_at": str(int(time.time())),
            }
        )

    async def _media_get(self, request: Request) -> Response:
        refused = self.token_refusal(request, "media/get")
        if refused is not None:
            return refused
        found = self.media.get(request.query_params.get("media_id", ""))
        if found is None:
            return self.refuse("media/get", 40007, "invalid media_id")
        kind, name, data = found
        self.record("media/get", {"media_id": request.query_params["media_id"]})
        content_type = "image/jpeg" if kind == "image" else "application/octet-stream"
        return Response(
            data,
            media_type=content_type,
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    # ------------------------------------------------------------------ the platform's side

    async def post_callback(self, params: dict[str, str], body: str, timeout: float = 5.0) -> httpx.Response:
        """POST `body` to the adapter's callback URL as the platform does (it gives up after 5 s);
        waits for the adapter's server to come up first."""
        async with httpx.AsyncClient(timeout=timeout) as http:
            async with asyncio.timeout(20):
                while True:
                    try:
                        return await http.post(
                            self.callback_url, params=params, content=body.encode(), headers=XML
                        )
                    except httpx.ConnectError:
                        await _pause()

    async def get_callback(self, params: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=5) as http:
            async with asyncio.timeout(20):
                while True:
                    try:
                        return await http.get(self.callback_url, params=params)
                    except httpx.ConnectError:
                        await _pause()


XML = {"Content-Type": "text/xml"}


async def _pause() -> None:
    await asyncio.sleep(0.05)  # the adapter's server is starting: try to connect again


def xml_of(fields: dict[str, Any]) -> str:
    """An `<xml>` document as the platforms write it (text in CDATA, numbers bare)."""
    parts = []
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, int):
            parts.append(f"<{name}>{value}</{name}>")
        else:
            parts.append(f"<{name}><![CDATA[{value}]]></{name}>")
    return "<xml>" + "".join(parts) + "</xml>"


def nonce() -> str:
    return str(secrets.randbelow(10**9))


def now() -> str:
    return str(int(time.time()))
