"""GitHub's REST API for the adapter: the comments an answer is shown in, through githubkit.

githubkit (GitHub's OpenAPI description as a typed client) makes the calls, authenticated with a
token or as a GitHub App installation (a JWT signed with the App's key buys an installation token,
cached until it expires; the installation is the one the delivery names). Its own retries are off:
a wait belongs to the reply stream (newest partial only, finals holding no consumer slot, the wait
kept in KV), so GitHub's limits become `RateLimited` here:

- a refusal for a rate limit (403 or 429 with `Retry-After`, or `X-RateLimit-Remaining: 0` until
  `X-RateLimit-Reset`; githubkit tells primary from secondary ones) holds every chat: GitHub
  counts them per user or App;
- GitHub's secondary limits also cap content-creating requests (at most 80 a minute) and ask
  for pauses between writes; rather than being refused, the adapter keeps under them: the 81st
  write in a minute waits for the window (every chat), and a comment is edited at most every
  `edit_interval_seconds` (that chat waits, and its newest text is what is shown next).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.exception import AuthCredentialError, RateLimitExceeded, RequestError, RequestFailed

from bus import Misconfigured, Unreachable
from channels.errors import PlatformError, PlatformUnavailable, RateLimited
from config.channels import GitHubConfig

log = logging.getLogger(__name__)

WRITES_PER_MINUTE = 80  # GitHub's secondary limit on content-creating requests
USER_AGENT = "antler-github-adapter"


class GitHubError(PlatformError):
    """GitHub refused a call (a 4xx that is not a rate limit): the status and GitHub's message."""

    def __init__(self, status: int, message: str, call: str) -> None:
        self.status = status
        super().__init__(f"GitHub answered {status} to {call}: {message}")


class GitHubUnavailable(PlatformUnavailable):
    """GitHub failed in a way that passes (a 5xx, or no answer): the reply is tried again."""


@dataclass(frozen=True)
class Place:
    """Where an answer goes: an issue's or pull request's conversation, or a diff comment's thread."""

    repo: str
    number: int
    installation_id: int | None = None
    review_comment_id: int | None = None

    @property
    def owner_name(self) -> tuple[str, str]:
        owner, _, name = self.repo.partition("/")
        return owner, name


class GitHubApi:
    """Post and edit comments; `RateLimited` when GitHub says to wait or the adapter keeps under its
    limits; `GitHubError` when it refuses; `GitHubUnavailable` when it fails or is out of reach."""

    def __init__(self, settings: GitHubConfig) -> None:
        token = settings.resolved("token")
        key = settings.resolved("private_key")
        self.app: AppAuthStrategy | None = None
        auth: TokenAuthStrategy | AppAuthStrategy
        if settings.app_id is not None and key:
            self.app = auth = AppAuthStrategy(settings.app_id, _pem(key))
        elif token:
            auth = TokenAuthStrategy(token)
        else:
            raise Misconfigured("channels.github: set token, or app_id and private_key")
        self.github = GitHub(
            auth,
            base_url=settings.base_url or None,
            user_agent=USER_AGENT,
            auto_retry=False,  # the reply stream waits (see the module's docstring)
            http_cache=False,
            timeout=30.0,
        )
        self.edit_interval = settings.edit_interval_seconds
        self._writes: deque[float] = deque()  # when the last minute's content-creating calls were made
        self._last_write: dict[str, float] = {}  # chat -> its last write

    def _client(self, place: Place) -> GitHub[Any]:
        if self.app is None:
            return self.github
        if place.installation_id is None:
            raise GitHubError(400, "the delivery named no installation to answer as", "the App's token")
        return self.github.with_auth(self.app.as_installation(place.installation_id))

    async def login(self) -> str:
        """Who the adapter writes as (the login people mention): the token's user, or the App's slug.
        Refused credentials are `Misconfigured`; GitHub out of reach, `Unreachable`."""
        try:
            if self.app is not None:
                app: Any = (await self.github.rest.apps.async_get_authenticated()).json()
                return str(app["slug"])
            return str((await self.github.rest.users.async_get_authenticated()).json()["login"])
        except (RequestFailed, AuthCredentialError, KeyError) as exc:
            raise Misconfigured(
                f"GitHub refused the adapter's credentials ({_describe(exc)}): check channels.github "
                "(token, or app_id and private_key)"
            ) from exc
        except RequestError as exc:
            raise Unreachable(self.github.config.base_url.netloc.decode(), _describe(exc)) from exc

    async def post(self, place: Place, body: str) -> int:
        """A new comment (in the diff comment's thread, for one); its id."""
        owner, name = place.owner_name
        self._pace(place, edit=False)
        github = self._client(place)
        call: Awaitable[Any]
        if place.review_comment_id is not None:
            call = github.rest.pulls.async_create_reply_for_review_comment(
                owner, name, place.number, place.review_comment_id, data={"body": body}
            )
        else:
            call = github.rest.issues.async_create_comment(owner, name, place.number, data={"body": body})
        response = await self._call(call, place, "create a comment")
        return int(response.json()["id"])

    async def edit(self, place: Place, comment_id: int, body: str) -> None:
        owner, name = place.owner_name
        self._pace(place, edit=True)
        github = self._client(place)
        call: Awaitable[Any]
        if place.review_comment_id is not None:
            call = github.rest.pulls.async_update_review_comment(owner, name, comment_id, data={"body": body})
        else:
            call = github.rest.issues.async_update_comment(owner, name, comment_id, data={"body": body})
        await self._call(call, place, "edit a comment")

    def _pace(self, place: Place, *, edit: bool) -> None:
        """Keep under GitHub's secondary limits (the module's docstring), or raise `RateLimited`."""
        now = time.monotonic()
        while self._writes and now - self._writes[0] >= 60:
            self._writes.popleft()
        if len(self._writes) >= WRITES_PER_MINUTE:
            wait = 60 - (now - self._writes[0])
            raise RateLimited(wait, "GitHub's 80 content-creating requests a minute", scope="platform")
        chat = f"{place.repo}#{place.number}"
        since = now - self._last_write.get(chat, -1e9)
        if edit and since < self.edit_interval:
            raise RateLimited(self.edit_interval - since, f"comments on {chat} are edited every few seconds")

    async def _call(self, call: Awaitable[Any], place: Place, what: str) -> Any:
        try:
            response = await call
        except RateLimitExceeded as exc:
            seconds = max(1.0, exc.retry_after.total_seconds())
            raise RateLimited(seconds, f"GitHub's {type(exc).__name__}", scope="platform") from exc
        except RequestFailed as exc:
            status = exc.response.status_code
            if status >= 500:
                raise GitHubUnavailable(f"GitHub answered {status} to {what}") from exc
            raise GitHubError(status, _message(exc), what) from exc
        except (RequestError, AuthCredentialError) as exc:
            raise GitHubUnavailable(f"GitHub could not {what}: {_describe(exc)}") from exc
        now = time.monotonic()
        self._writes.append(now)
        chat = f"{place.repo}#{place.number}"
        self._last_write[chat] = now
        if len(self._last_write) > 10_000:  # chats long quiet: their pauses are over
            self._last_write = {k: v for k, v in self._last_write.items() if now - v < self.edit_interval}
        return response


def _pem(key: str) -> str:
    """The private key itself, or read from the path given instead."""
    if key.lstrip().startswith("-----BEGIN"):
        return key
    path = Path(key).expanduser()
    if not path.is_file():
        raise Misconfigured("channels.github.private_key is neither a PEM key nor a readable file")
    return path.read_text()


def _message(exc: RequestFailed) -> str:
    try:
        body = exc.response.json()
    except ValueError:
        return exc.response.text[:200]
    return str(body.get("message") if isinstance(body, dict) else body)[:200]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RequestFailed):
        return f"{exc.response.status_code}: {_message(exc)}"
    inner = getattr(exc, "exc", None)
    return f"{type(inner or exc).__name__}: {inner or exc}"
