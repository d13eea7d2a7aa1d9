"""A fake GitHub, written from GitHub's REST API and webhook documentation (not from any SDK).

The REST side: who the token is (`GET /user`), a GitHub App (`GET /app`, installation tokens from
`POST /app/installations/{id}/access_tokens`, both with the App's RS256 JWT), and the comments an
answer is shown in: issue and pull-request comments (`POST /repos/{o}/{r}/issues/{n}/comments`,
`PATCH /repos/{o}/{r}/issues/comments/{id}`) and replies in a diff comment's review thread
(`POST /repos/{o}/{r}/pulls/{n}/comments/{id}/replies`, `PATCH /repos/{o}/{r}/pulls/comments/{id}`).
Its limits as documented: a body of at most 65,536 characters (422 otherwise), and the secondary
limit on content-creating requests (80 a minute): refused with 403, a `Retry-After` and GitHub's
message. A test arms one more (`flood.arm("comments", s)`, 403 with `Retry-After`).

The webhook side: deliveries as GitHub sends them, a JSON payload (shapes from "Webhook events and
payloads") posted with `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID, the same when redelivered),
`X-Hub-Signature-256` (`sha256=` and the HMAC-SHA256 hex digest of the body with the secret) and
`User-Agent: GitHub-Hookshot/...`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from tests.fakes._server import LocalServer

MAX_BODY = 65_536
WRITES_PER_MINUTE = 80
_ids = itertools.count(int(time.time()) % 1_000_000 * 1000)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user(login: str, *, bot: bool = False) -> dict[str, Any]:
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:7], 16)
    return {
        "login": login,
        "id": uid,
        "node_id": f"U_{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}",
        "url": f"https://api.github.com/users/{login}",
        "html_url": f"https://github.com/{login}",
        "type": "Bot" if bot else "User",
        "site_admin": False,
    }


class FakeGitHub(LocalServer):
    def __init__(self, login: str = "antler-bot") -> None:
        super().__init__()
        self.login = login
        self.token = "ghp_" + uuid.uuid4().hex
        self.secret = "webhook-" + uuid.uuid4().hex[:12]
        self.repo = "acme/widgets"
        self.app_id = 4242
        self.app_slug = "antler-app"
        self.installation_id = 777
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.installation_tokens: set[str] = set()
        self.comments: dict[int, dict[str, Any]] = {}  # id -> the comment as it is now, with "edits"
        self.refusals: list[tuple[int, str]] = []  # (status, what) of every refused call
        self.webhook_url = ""
        self._writes: list[float] = []
        self.app = FastAPI()
        self.app.add_api_route("/user", self._user, methods=["GET"])
        self.app.add_api_route("/app", self._app, methods=["GET"])
        self.app.add_api_route(
            "/app/installations/{installation}/access_tokens", self._access_token, methods=["POST"]
        )
        base = "/repos/{owner}/{repo}"
        self.app.add_api_route(base + "/issues/{number}/comments", self._create, methods=["POST"])
        self.app.add_api_route(base + "/issues/comments/{comment_id}", self._update, methods=["PATCH"])
        self.app.add_api_route(
            base + "/pulls/{number}/comments/{comment_id}/replies", self._reply, methods=["POST"]
        )
        self.app.add_api_route(base + "/pulls/comments/{comment_id}", self._update, methods=["PATCH"])
        self.attachments: dict[str, tuple[bytes, str]] = {}  # id -> (data, content type)
        self.app.add_api_route("/user-attachments/{kind}/{ident}/{name}", self._attachment, methods=["GET"])
        self.app.add_api_route("/user-attachments/{kind}/{ident}", self._attachment, methods=["GET"])
        self.app.add_api_route("/storage/{ident}", self._stored, methods=["GET"])
        self.app.add_api_route("/elsewhere", self._elsewhere, methods=["GET"])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def private_key(self) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def settings(self, port: int, *, app: bool = False) -> dict[str, Any]:
        """The adapter's config section for this fake, its webhook served on `port`."""
        self.webhook_url = f"http://127.0.0.1:{port}/github/webhook"
        auth = {"app_id": self.app_id, "private_key": self.private_key} if app else {"token": self.token}
        return {
            **auth,
            "webhook_secret": self.secret,
            "webhook_port": port,
            "base_url": self.base_url,
            "web_url": self.base_url,
            "edit_interval_seconds": 1.0,
        }

    # ------------------------------------------------------------------ what tests read

    def answers(self) -> list[dict[str, Any]]:
        """The bot's comments, oldest first."""
        return sorted(self.comments.values(), key=lambda c: c["id"])

    def bodies(self) -> list[str]:
        return [comment["body"] for comment in self.answers()]

    # ------------------------------------------------------------------ auth

    def _caller(self, request: Request) -> str | None:
        """The login a request acts as, or None when its credentials are not good."""
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        if credential == self.token:
            return self.login
        if credential in self.installation_tokens:
            return f"{self.app_slug}[bot]"
        return None

    def _app_jwt(self, request: Request) -> bool:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        try:
            claims = jwt.decode(credential, self.key.public_key(), algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return str(claims.get("iss")) == str(self.app_id)

    def _refuse(self, status: int, message: str, what: str, **headers: str) -> Response:
        self.refusals.append((status, what))
        self.changed()
        body = {"message": message, "documentation_url": "https://docs.github.com/rest"}
        return JSONResponse(body, status_code=status, headers=headers)

    async def _user(self, request: Request) -> Response:
        self.record("user", {})
        login = self._caller(request)
        if login is None:
            return self._refuse(401, "Bad credentials", "user")
        return JSONResponse(user(login))

    async def _app(self, request: Request) -> Response:
        self.record("app", {})
        if not self._app_jwt(request):
            return self._refuse(401, "A JSON web token could not be decoded", "app")
        return JSONResponse(
            {"id": self.app_id, "slug": self.app_slug, "name": "Antler", "owner": user("acme")}
        )

    async def _access_token(self, installation: int, request: Request) -> Response:
        self.record("access_tokens", {"installation": installation})
        if not self._app_jwt(request):
            return self._refuse(401, "A JSON web token could not be decoded", "access_tokens")
        if installation != self.installation_id:
            return self._refuse(404, "Not Found", "access_tokens")
        token = "ghs_" + uuid.uuid4().hex
        self.installation_tokens.add(token)
        expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return JSONResponse({"token": token, "expires_at": expires, "permissions": {"issues": "write"}}, 201)

    # ------------------------------------------------------------------ comments

    async def _checked(self, request: Request, what: str) -> tuple[str, str] | Response:
        """(login, body) of a comment write, or GitHub's refusal."""
        login = self._caller(request)
        if login is None:
            return self._refuse(401, "Bad credentials", what)
        try:
            body = (await request.json())["body"]
            assert isinstance(body, str)
        except (ValueError, KeyError, AssertionError):
            return self._refuse(422, 'Invalid request.\n\n"body" wasn\'t supplied.', what)
        if len(body) > MAX_BODY:
            return self._refuse(
                422, f"Validation Failed: body is too long (maximum is {MAX_BODY} characters)", what
            )
        if (wait := self.flood.refusal("comments")) is not None:
            return self._refuse(
                403, "You have exceeded a secondary rate limit.", what, **{"Retry-After": str(wait)}
            )
        now = time.monotonic()
        self._writes = [t for t in self._writes if now - t < 60]
        if len(self._writes) >= WRITES_PER_MINUTE:
            wait = max(1, int(60 - (now - self._writes[0])) + 1)
            return self._refuse(
                403, "You have exceeded a secondary rate limit.", what, **{"Retry-After": str(wait)}
            )
        self._writes.append(now)
        return login, body

    def _new(self, owner: str, repo: str, login: str, body: str, **extra: Any) -> dict[str, Any]:
        comment_id = next(_ids)
        comment = {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": f"{self.base_url}/repos/{owner}/{repo}/issues/comments/{comment_id}",
            "html_url": f"https://github.com/{owner}/{repo}/issues/1#issuecomment-{comment_id}",
            "body": body,
            "user": user(login, bot=login.endswith("[bot]")),
            "created_at": _now(),
            "updated_at": _now(),
            "author_association": "NONE",
            "repo": f"{owner}/{repo}",
            "edits": [],
            **extra,
        }
        self.comments[comment_id] = comment
        return comment

    async def _create(self, owner: str, repo: str, number: int, request: Request) -> Response:
        checked = await self._checked(request, "create")
        if isinstance(checked, Response):
            return checked
        comment = self._new(owner, repo, *checked, number=number)
        self.record("create", {"number": number, "body": checked[1]})
        return JSONResponse(_public(comment), status_code=201)

    async def _reply(self, owner: str, repo: str, number: int, comment_id: int, request: Request) -> Response:
        checked = await self._checked(request, "reply")
        if isinstance(checked, Response):
            return checked
        comment = self._new(owner, repo, *checked, number=number, in_reply_to_id=comment_id)
        self.record("reply", {"number": number, "in_reply_to": comment_id, "body": checked[1]})
        return JSONResponse(_public(comment), status_code=201)

    async def _update(self, owner: str, repo: str, comment_id: int, request: Request) -> Response:
        await request.body()  # sent in full before the connection can drop
        await self.held("update")
        checked = await self._checked(request, "update")
        if isinstance(checked, Response):
            return checked
        login, body = checked
        comment = self.comments.get(comment_id)
        if comment is None or comment["repo"] != f"{owner}/{repo}":
            return self._refuse(404, "Not Found", "update")
        if comment["user"]["login"] != login:
            return self._refuse(403, "Resource not accessible by integration", "update")
        comment["edits"].append(comment["body"])
        comment["body"], comment["updated_at"] = body, _now()
        self.record("update", {"id": comment_id, "body": body})
        return JSONResponse(_public(comment))

    # ------------------------------------------------------------------ attachments

    def attach(self, name: str, data: bytes, content_type: str) -> str:
        """A file dropped into a comment: its URL as GitHub writes it into the comment's Markdown
        (an image under `user-attachments/assets/<id>`, another file under `files/<id>/<name>`)."""
        ident = uuid.uuid4().hex if content_type.startswith("image/") else str(next(_ids))
        self.attachments[ident] = (data, content_type)
        if content_type.startswith("image/"):
            return f"{self.base_url}/user-attachments/assets/{ident}"
        return f"{self.base_url}/user-attachments/files/{ident}/{name}"

    async def _attachment(self, kind: str, ident: str, name: str = "") -> Response:
        self.record("attachment", {"kind": kind, "id": ident})
        if ident not in self.attachments:
            return Response(status_code=404)
        # GitHub answers with a redirect to its storage, a signed URL on another host
        return Response(status_code=302, headers={"Location": f"{self.base_url}/storage/{ident}"})

    async def _stored(self, ident: str) -> Response:
        data, content_type = self.attachments[ident]
        return Response(data, media_type=content_type)

    async def _elsewhere(self) -> Response:
        self.record("elsewhere", {})
        return Response(b"not an attachment")

    # ------------------------------------------------------------------ webhook deliveries

    def issue_comment(
        self, body: str, *, number: int = 1, author: str = "alice", pull: bool = False, bot: bool = False
    ) -> dict[str, Any]:
        """An `issue_comment` `created` payload: `author` commented `body` on issue (or PR) `number`."""
        comment_id = next(_ids)
        issue: dict[str, Any] = {
            "id": number * 1000,
            "number": number,
            "title": f"Issue {number}",
            "body": "The widget breaks.",
            "state": "open",
            "user": user("carol"),
            "html_url": f"https://github.com/{self.repo}/issues/{number}",
            "comments": 1,
        }
        if pull:
            issue["pull_request"] = {"url": f"https://api.github.com/repos/{self.repo}/pulls/{number}"}
        return {
            "action": "created",
            "issue": issue,
            "comment": {
                "id": comment_id,
                "body": body,
                "user": user(author, bot=bot),
                "html_url": f"https://github.com/{self.repo}/issues/{number}#issuecomment-{comment_id}",
                "created_at": _now(),
            },
            **self._envelope(author),
        }

    def review_comment(self, body: str, *, number: int = 5, author: str = "alice") -> dict[str, Any]:
        """A `pull_request_review_comment` `created` payload: a comment on a line of PR `number`."""
        comment_id = next(_ids)
        return {
            "action": "created",
            "comment": {
                "id": comment_id,
                "body": body,
                "path": "src/widget.py",
                "line": 12,
                "diff_hunk": "@@ -10,3 +10,3 @@",
                "user": user(author),
                "html_url": f"https://github.com/{self.repo}/pull/{number}#discussion_r{comment_id}",
            },
            "pull_request": {
                "number": number,
                "title": f"PR {number}",
                "state": "open",
                "user": user("carol"),
            },
            **self._envelope(author),
        }

    def issue_opened(
        self, title: str, body: str, *, number: int = 9, author: str = "alice"
    ) -> dict[str, Any]:
        return {
            "action": "opened",
            "issue": {
                "number": number,
                "title": title,
                "body": body,
                "user": user(author),
                "html_url": f"https://github.com/{self.repo}/issues/{number}",
            },
            **self._envelope(author),
        }

    def _envelope(self, sender: str) -> dict[str, Any]:
        owner, _, name = self.repo.partition("/")
        return {
            "repository": {
                "id": 1296269,
                "name": name,
                "full_name": self.repo,
                "owner": user(owner),
                "private": False,
            },
            "sender": user(sender),
            "installation": {"id": self.installation_id, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u"},
        }

    def sign(self, body: bytes, secret: str | None = None) -> str:
        key = (secret or self.secret).encode()
        return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()

    async def deliver(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        delivery: str | None = None,
        signature: str | None = None,
        form: bool = False,
        timeout: float = 30.0,
    ) -> httpx.Response:
        """POST a delivery to the adapter as GitHub does (`signature`: instead of the right one; ""
        for none). A refused connection is tried again until `timeout` (as an operator redelivers)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        if form:  # the content type "application/x-www-form-urlencoded": the JSON in `payload`
            body = urlencode({"payload": body.decode()}).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
            "User-Agent": "GitHub-Hookshot/9f2a1c3",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "123456",
            "X-Hub-Signature-256": self.sign(body) if signature is None else signature,
        }
        if not headers["X-Hub-Signature-256"]:
            del headers["X-Hub-Signature-256"]
        async with asyncio.timeout(timeout), httpx.AsyncClient(timeout=10) as http:
            while True:
                try:
                    return await http.post(self.webhook_url, content=body, headers=headers)
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
                    await asyncio.sleep(0.2)


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in comment.items() if k not in ("edits", "repo", "number")}
