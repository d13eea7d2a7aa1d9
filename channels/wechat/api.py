"""Tencent's JSON APIs as the WeChat and WeCom adapters use them: an access token fetched once and
cached, calls that fetch a new one when the platform says it expired, and refusals sorted for the
reply stream.

Both platforms answer every call with HTTP 200 and a JSON `errcode` (0: done). The adapter reads it:

- 40014 / 42001 / 40001 (the access token is invalid or expired: WeCom's documented reasons to get a
  new one, and what an Official Account answers when its token was replaced by another `token` call)
  fetch a new token and make the call once more;
- 45009 / 45011 (the app's call quota, per minute or per day) are `RateLimited` for every chat;
- -1 ("system busy") and HTTP 5xx are `WeixinUnavailable`, tried again later;
- anything else is `WeixinError`, with the platform's `code` and `errmsg`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from channels.errors import PlatformError, PlatformUnavailable, RateLimited

log = logging.getLogger(__name__)

TOKEN_REFUSED = {40001, 40014, 42001}  # invalid credential / invalid access_token / access_token expired
QUOTA = {45009, 45011}  # the app's API call limits: retry in the next minute
QUOTA_WAIT = 60.0
BUSY = -1
TOKEN_MARGIN = 300  # seconds before the stated expiry when a token is fetched anew


class WeixinError(PlatformError):
    """The platform refused a call with `code` (its `errcode`) and `errmsg`; trying again will not
    help."""

    def __init__(self, code: int, errmsg: str, what: str) -> None:
        self.code = code
        self.errmsg = errmsg
        super().__init__(f"{what}: errcode {code}: {errmsg}")


class WeixinUnavailable(PlatformUnavailable):
    """The platform failed in a way that passes (a 5xx, errcode -1): tried again later."""


TokenFetcher = Callable[[httpx.AsyncClient, str], Awaitable[httpx.Response]]


class WeixinApi:
    """One app's API calls, its access token cached until shortly before it expires.

    `fetch_token(http, base)` makes the platform's token request (WeCom's `gettoken`, an Official
    Account's `token`); its answer is `{"access_token", "expires_in"}` or an `errcode`."""

    def __init__(self, http: httpx.AsyncClient, base: str, fetch_token: TokenFetcher, name: str) -> None:
        self.http = http
        self.base = base.rstrip("/")
        self.name = name
        self._fetch_token = fetch_token
        self._token: tuple[str, float] | None = None
        self._lock = asyncio.Lock()

    async def access_token(self, *, stale: str | None = None) -> str:
        """The cached token, or a new one if there is none, it is about to expire, or it is `stale`
        (the platform refused it: several calls may say so at once, one fetch serves them all)."""
        async with self._lock:
            if self._token is not None and (stale is None or self._token[0] != stale):
                if self._token[1] > time.monotonic():
                    return self._token[0]
            response = await self._fetch_token(self.http, self.base)
            body = _json(response, "the access token request", self.name)
            token = body.get("access_token")
            if not token:
                raise WeixinError(int(body.get("errcode") or 0), str(body.get("errmsg")), "access token")
            lifetime = int(body.get("expires_in") or 7200)
            self._token = (str(token), time.monotonic() + max(60, lifetime - TOKEN_MARGIN))
            log.info("%s: new access token (valid %ds)", self.name, lifetime)
            return self._token[0]

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        files: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`path` with the access token; the JSON answer once its errcode is 0."""
        response = await self._authorized(method, path, json=json, params=params, files=files)
        return _json(response, path, self.name)

    async def download(self, path: str, media_id: str) -> httpx.Response:
        """A media file (`media/get`): the response with its bytes; an errcode answer raises."""
        return await self._authorized("GET", path, params={"media_id": media_id})

    async def _authorized(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        params = dict(kwargs.pop("params") or {})
        token = await self.access_token()
        for attempt in (1, 2):
            response = await self.http.request(
                method, f"{self.base}{path}", params={**params, "access_token": token}, **kwargs
            )
            if response.status_code == 429:
                raise RateLimited(QUOTA_WAIT, f"{self.name} rate limit on {path}", scope="platform")
            if response.status_code >= 500:
                raise WeixinUnavailable(f"{self.name} answered {response.status_code} to {path}")
            if "json" not in response.headers.get("content-type", "") and response.content[:1] != b"{":
                return response  # a media file
            code = _errcode(response)
            if code in TOKEN_REFUSED and attempt == 1:
                log.info(
                    "%s: access token refused on %s (errcode %s); fetching a new one", self.name, path, code
                )
                token = await self.access_token(stale=token)
                continue
            return response
        return response


def _errcode(response: httpx.Response) -> int:
    try:
        body = response.json()
    except ValueError:
        return 0
    return int(body.get("errcode") or 0) if isinstance(body, dict) else 0


def _json(response: httpx.Response, what: str, name: str) -> dict[str, Any]:
    if response.status_code == 429:
        raise RateLimited(QUOTA_WAIT, f"{name} rate limit on {what}", scope="platform")
    if response.status_code >= 500:
        raise WeixinUnavailable(f"{name} answered {response.status_code} to {what}")
    try:
        body = response.json()
    except ValueError as exc:
        raise WeixinUnavailable(f"{name} answered {what} with something that is not JSON") from exc
    if not isinstance(body, dict):
        raise WeixinUnavailable(f"{name} answered {what} with something that is not a JSON object")
    code = int(body.get("errcode") or 0)
    if code == 0:
        return body
    errmsg = str(body.get("errmsg") or "")
    if code in QUOTA:
        raise RateLimited(QUOTA_WAIT, f"{name} quota on {what} ({errmsg})", scope="platform")
    if code == BUSY:
        raise WeixinUnavailable(f"{name} is busy ({what}: {errmsg})")
    raise WeixinError(code, errmsg, f"{name} {what}")
