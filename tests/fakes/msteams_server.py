"""A fake Microsoft Teams for a bot, written from Microsoft's Bot Framework and Teams documentation:
the token service a bot gets its connector token from (OAuth 2.0 client credentials, `POST
/{tenant}/oauth2/v2.0/token`), the Bot Framework's signing keys (`/v1/.well-known/keys`, a JWKS),
the Bot Connector REST API (`/v3/conversations/{id}/activities`: send, reply, update, with Teams'
per-conversation rate limit answered by 429 and `Retry-After`), files users share, and the Teams
side of the messaging endpoint: activities as Teams posts them (personal chats, channel
conversations with `<at>` mentions), each signed with a JWT as the Bot Connector signs them
(`iss` https://api.botframework.com, `aud` the bot's app id, a `serviceUrl` claim).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from jwt.algorithms import RSAAlgorithm

from tests.fakes._server import LocalServer

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
TEXT_BYTES = 28 * 1024  # Teams refuses a message over about 28 KB
# Teams' limit per bot and conversation: 7 operations a second (and 8 in 2 s; longer windows omitted).
PER_SECOND = 7
AMS_IMAGE = "http://schema.skype.com/AMSImage"
DENIED = JSONResponse({"message": "Authorization has been denied for this request."}, status_code=401)


class FakeTeams(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        from fastapi import FastAPI

        self.app = FastAPI()
        self.app_id = str(uuid.uuid4())
        self.app_password = "bot-secret-" + uuid.uuid4().hex[:8]
        self.bot_id = f"28:{self.app_id}"
        self.bot_name = "Antler"
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "fake-key-" + uuid.uuid4().hex[:6]
        self._tokens: dict[str, float] = {}  # connector tokens issued -> when they expire
        self.activities: dict[str, list[dict[str, Any]]] = {}  # conversation -> the bot's activities
        self.typing: list[str] = []  # conversations the bot sent a typing indicator to
        self.files: dict[str, tuple[str, bytes]] = {}  # file id -> (name, content) users shared
        self.uploaded: dict[str, bytes] = {}  # file name -> what the bot put in the user's OneDrive
        self._ops: dict[str, deque[float]] = {}  # conversation -> times of the bot's recent calls
        self.throttled: list[str] = []  # conversations a call was refused for (429)
        self.endpoint = ""
        self._ids = 0
        self._uploads: dict[str, str] = {}  # upload session id -> the file name it is for
        app = self.app
        app.add_api_route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"])
        app.add_api_route("/v1/.well-known/keys", self._keys, methods=["GET"])
        app.add_api_route("/v1/.well-known/openidconfiguration", self._openid, methods=["GET"])
        app.add_api_route("/files/{file_id}", self._file, methods=["GET"])
        app.add_api_route("/onedrive/upload/{file_id}", self._upload, methods=["PUT"])
        app.add_api_route("/amer/v3/attachments/{file_id}/views/original", self._inline, methods=["GET"])
        app.add_api_route("/amer/v3/conversations/{conversation}/activities", self._send, methods=["POST"])
        app.add_api_route(
            "/amer/v3/conversations/{conversation}/activities/{activity}", self._reply, methods=["POST"]
        )
        app.add_api_route(
            "/amer/v3/conversations/{conversation}/activities/{activity}", self._update, methods=["PUT"]
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service_url(self) -> str:
        return f"{self.base_url}/amer/"

    def settings(self, port: int) -> dict[str, Any]:
        """The adapter's config section for this fake, its messaging endpoint served on `port`."""
        self.endpoint = f"http://127.0.0.1:{port}/api/messages"
        return {
            "app_id": self.app_id,
            "app_password": self.app_password,
            "webhook_port": port,
            "token_url": f"{self.base_url}/botframework.com/oauth2/v2.0/token",
            "signing_keys_url": f"{self.base_url}/v1/.well-known/openidconfiguration",
        }

    # ------------------------------------------------------------------ token service and keys

    async def _token(self, tenant: str, request: Request) -> Response:
        form = dict((await request.form()).items())
        self.record(
            "token", {"tenant": tenant, **{k: str(v) for k, v in form.items() if k != "client_secret"}}
        )
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if form.get("client_id") != self.app_id or form.get("client_secret") != self.app_password:
            return JSONResponse(
                {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret."},
                status_code=401,
            )
        if form.get("scope") != SCOPE:
            return JSONResponse({"error": "invalid_scope"}, status_code=400)
        token = "conn-" + uuid.uuid4().hex
        self._tokens[token] = time.time() + 3599
        return JSONResponse(
            {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}
        )

    async def _openid(self) -> Response:
        """The Bot Framework's OpenID metadata: who issues the tokens and where its keys are."""
        return JSONResponse(
            {
                "issuer": ISSUER,
                "authorization_endpoint": "https://invalid.botframework.com",
                "jwks_uri": f"{self.base_url}/v1/.well-known/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self) -> Response:
        public = json.loads(RSAAlgorithm.to_jwk(self._key.public_key()))
        return JSONResponse(
            {"keys": [{**public, "kid": self.kid, "use": "sig", "kty": "RSA", "endorsements": ["msteams"]}]}
        )

    def signed(self, *, key: rsa.RSAPrivateKey | None = None, **claims: Any) -> str:
        """A token as the Bot Connector signs its requests to a bot (`claims` override the defaults)."""
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": self.app_id,
            "serviceurl": self.service_url,
            "nbf": now - 5,
            "exp": now + 3600,
            **claims,
        }
        return jwt.encode(body, key or self._key, algorithm="RS256", headers={"kid": self.kid})

    def expire_tokens(self) -> None:
        """Every connector token issued so far is refused from now on (401), as when one expires."""
        self._tokens.clear()

    def _authorized(self, request: Request) -> bool:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return self._tokens.get(token, 0) > time.time()

    # ------------------------------------------------------------------ the Bot Connector

    def _limited(self, conversation: str) -> Response | None:
        """429 with `Retry-After` past Teams' limit in `conversation`, or while a test's
        `flood.arm("conversation", seconds, key=conversation)` holds it."""
        now = time.monotonic()
        recent = self._ops.setdefault(conversation, deque())
        while recent and now - recent[0] > 1.0:
            recent.popleft()
        wait = self.flood.refusal("conversation", conversation)
        if wait is None and len(recent) >= PER_SECOND:
            wait = max(1, round(1.0 - (now - recent[0]) + 0.5))
        if wait is not None:
            self.throttled.append(conversation)
            self.record("throttled", {"conversation": conversation})
            return JSONResponse(
                {"error": {"code": "TooManyRequests", "message": "Too many requests"}},
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
        recent.append(now)
        return None

    async def _checked(self, request: Request, conversation: str, method: str) -> dict[str, Any] | Response:
        if not self._authorized(request):
            return JSONResponse(
                {"message": "Authorization has been denied for this request."}, status_code=401
            )
        await self.held(method)
        if self.broken(method):
            return JSONResponse({"error": {"code": "ServiceError"}}, status_code=502)
        limited = self._limited(conversation.split(";")[0])
        if limited is not None:
            return limited
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"error": {"code": "BadArgument", "message": "not JSON"}}, status_code=400)
        if not isinstance(body, dict) or not body.get("type"):
            return JSONResponse({"error": {"code": "BadArgument", "message": "no type"}}, status_code=400)
        if len((body.get("text") or "").encode()) > TEXT_BYTES:
            return JSONResponse(
                {"error": {"code": "MessageSizeTooBig", "message": "Message size too big"}}, status_code=413
            )
        return body

    def _new(self, conversation: str, body: dict[str, Any], method: str) -> Response:
        if body["type"] == "typing":
            self.typing.append(conversation)
            self.record(method, body)
            return JSONResponse({})
        self._ids += 1
        activity_id = f"{int(time.time() * 1000)}{self._ids:03d}"
        self.activities.setdefault(conversation, []).append({**body, "id": activity_id, "edits": []})
        self.record(method, {**body, "conversation": conversation})
        return JSONResponse({"id": activity_id}, status_code=201)

    async def _send(self, conversation: str, request: Request) -> Response:
        checked = await self._checked(request, conversation, "sendToConversation")
        return (
            checked
            if isinstance(checked, Response)
            else self._new(conversation, checked, "sendToConversation")
        )

    async def _reply(self, conversation: str, activity: str, request: Request) -> Response:
        checked = await self._checked(request, conversation, "replyToActivity")
        if isinstance(checked, Response):
            return checked
        return self._new(conversation, {**checked, "replyToId": activity}, "replyToActivity")

    async def _update(self, conversation: str, activity: str, request: Request) -> Response:
        checked = await self._checked(request, conversation, "updateActivity")
        if isinstance(checked, Response):
            return checked
        found = [a for a in self.activities.get(conversation, []) if a["id"] == activity]
        if not found:
            return JSONResponse(
                {"error": {"code": "NotFound", "message": "activity not found"}}, status_code=404
            )
        found[0]["edits"].append(found[0].get("text"))
        found[0]["text"] = checked.get("text")
        found[0]["attachments"] = checked.get("attachments")
        self.record("updateActivity", {**checked, "conversation": conversation, "id": activity})
        return JSONResponse({"id": activity})

    async def _file(self, file_id: str) -> Response:
        name, data = self.files[file_id]
        return Response(data, headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def _upload(self, file_id: str, request: Request) -> Response:
        """OneDrive's upload session URL from a file consent: one PUT with the whole file."""
        data = await request.body()
        expected = f"bytes 0-{max(len(data) - 1, 0)}/{len(data)}"
        if request.headers.get("Content-Range") != expected:
            return JSONResponse({"error": {"code": "invalidRange"}}, status_code=416)
        name = self._uploads.pop(file_id, None)
        if name is None:
            return JSONResponse({"error": {"code": "itemNotFound"}}, status_code=404)
        self.uploaded[name] = data
        self.record("upload", {"name": name, "size": len(data)})
        return JSONResponse({"id": file_id, "name": name, "size": len(data)}, status_code=201)

    async def _inline(self, file_id: str, request: Request) -> Response:
        """A picture pasted into a message: the connector serves it to the bot's token only."""
        self.record("attachmentView", {"id": file_id})
        if not self._authorized(request):
            return JSONResponse(
                {"message": "Authorization has been denied for this request."}, status_code=401
            )
        return Response(self.files[file_id][1], media_type="image/png")

    def bot_messages(self, conversation: str | None = None) -> list[dict[str, Any]]:
        """The bot's messages (text and edits so far), in order, in one conversation or all."""
        chosen = [conversation] if conversation else list(self.activities)
        return [a for c in chosen for a in self.activities.get(c, [])]

    # ------------------------------------------------------------------ Teams posting to the bot

    def share_file(self, name: str, data: bytes) -> dict[str, Any]:
        """An attachment as Teams puts a file a user shares with the bot in a personal chat."""
        file_id = uuid.uuid4().hex
        self.files[file_id] = (name, data)
        return {
            "contentType": "application/vnd.microsoft.teams.file.download.info",
            "contentUrl": f"{self.base_url}/sites/user/Documents/{name}",
            "name": name,
            "content": {
                "downloadUrl": f"{self.base_url}/files/{file_id}",
                "uniqueId": file_id,
                "fileType": name.rsplit(".", 1)[-1],
            },
        }

    def paste_image(self, data: bytes) -> list[dict[str, Any]]:
        """The attachments of a message with a picture pasted in, as Teams sends them: the picture
        at the connector, and the message's own HTML (not a file)."""
        file_id = "0-eus-d1-" + uuid.uuid4().hex
        self.files[file_id] = ("pasted.png", data)
        return [
            {
                "contentType": "image/*",
                "contentUrl": f"{self.service_url}v3/attachments/{file_id}/views/original",
            },
            {
                "contentType": "text/html",
                "content": '<div><img src="..." itemtype="http://schema.skype.com/AMSImage"></div>',
            },
        ]

    def activity(
        self,
        text: str,
        *,
        conversation: str = "a:1personal-chat",
        kind: str = "personal",
        mention: bool = False,
        attachments: list[dict[str, Any]] | None = None,
        user: str = "29:1user-megan",
    ) -> dict[str, Any]:
        """A message activity as Teams posts it: in a personal chat, or in a channel (`kind`
        "channel", `conversation` the reply chain "19:...@thread.tacv2;messageid=...")."""
        self._ids += 1
        bot = {"id": self.bot_id, "name": self.bot_name}
        entities: list[dict[str, Any]] = [{"type": "clientInfo", "locale": "en-US", "platform": "Web"}]
        if mention:
            tag = f"<at>{self.bot_name}</at>"
            text = f"{tag} {text}"
            entities.append({"type": "mention", "mentioned": bot, "text": tag})
        body: dict[str, Any] = {
            "type": "message",
            "id": f"{int(time.time() * 1000)}{self._ids:03d}",
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "serviceUrl": self.service_url,
            "channelId": "msteams",
            "from": {
                "id": user,
                "name": "Megan Bowen",
                "aadObjectId": str(uuid.uuid5(uuid.NAMESPACE_URL, user)),
            },
            "conversation": {"conversationType": kind, "tenantId": TENANT, "id": conversation},
            "recipient": bot,
            "textFormat": "plain",
            "text": text,
            "attachments": attachments or [],
            "entities": entities,
            "channelData": {"tenant": {"id": TENANT}},
            "locale": "en-US",
        }
        if kind == "channel":
            channel = conversation.split(";")[0]
            body["conversation"]["isGroup"] = True
            body["channelData"].update(
                {"teamsChannelId": channel, "teamsTeamId": channel, "channel": {"id": channel}}
            )
        return body

    async def post(self, activity: dict[str, Any] | bytes, token: str | None = "") -> httpx.Response:
        """POST an activity to the bot's messaging endpoint as the Bot Connector does (signed, unless
        `token` is None or given), waiting for the adapter's server to come up first."""
        headers = {"Content-Type": "application/json"}
        bearer = self.signed() if token == "" else token
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        content = activity if isinstance(activity, bytes) else json.dumps(activity).encode()
        async with httpx.AsyncClient(timeout=15) as http:
            async with asyncio.timeout(30):
                while True:
                    try:
                        return await http.post(self.endpoint, content=content, headers=headers)
                    except httpx.ConnectError:
                        await asyncio.sleep(0.05)  # the adapter's server is starting: try again

    async def accept_file(
        self, card: dict[str, Any], conversation: str = "a:1personal-chat"
    ) -> httpx.Response:
        """The user pressing Allow on a file consent card the bot sent: Teams' `fileConsent/invoke`
        with an upload URL in the user's OneDrive."""
        content = card["content"]
        session = uuid.uuid4().hex
        name = card["name"]
        self._uploads[session] = name
        invoke = self.activity("", conversation=conversation)
        invoke.update(
            type="invoke",
            name="fileConsent/invoke",
            text=None,
            value={
                "type": "fileUpload",
                "action": "accept",
                "context": content["acceptContext"],
                "uploadInfo": {
                    "contentUrl": f"{self.base_url}/sites/user/Documents/Applications/{name}",
                    "name": name,
                    "uploadUrl": f"{self.base_url}/onedrive/upload/{session}",
                    "uniqueId": session.upper(),
                    "fileType": name.rsplit(".", 1)[-1],
                },
            },
        )
        return await self.post(invoke)

    async def press(self, action: dict[str, Any], card_activity: str, **kwargs: Any) -> httpx.Response:
        """The user pressing an Adaptive Card's Action.Submit button: Teams posts a message activity
        with no text, the action's `data` as its `value`, replying to the card's activity."""
        pressed = self.activity("", **kwargs)
        del pressed["text"]
        pressed.update(value=action["data"], replyToId=card_activity)
        return await self.post(pressed)

    async def say(self, text: str, **kwargs: Any) -> httpx.Response:
        return await self.post(self.activity(text, **kwargs))
