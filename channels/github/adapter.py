"""The GitHub adapter: webhook deliveries in, the answer as a comment out.

Inbound: GitHub posts each delivery of the App's (or repository's) webhook to `webhook_path`, as
JSON or (a repository webhook's default content type) form-encoded in its `payload` field.
Its `X-Hub-Signature-256` (an HMAC-SHA256 of the body with the webhook secret) is checked first:
a delivery without it, or whose signature does not hold, is refused with 401 and reaches nothing.
A new comment on an issue or pull request (or on a pull request's diff), or a new issue, that
mentions the bot (`@login`; every one, with `require_mention_in_groups: false`) becomes an
InboundMessage on `<prefix>.chat.in.github` (`channels.github.events`): one chat, so one Antler
thread, per issue or pull request (`owner/name#N`), with the files attached to the comment
(`channels.github.attachments`). Its message id is the delivery's id, so a
delivery GitHub (or an operator) sends again, to this copy or another, becomes no second run.
Other events and actions, repositories not in `repositories`, and comments by bots (the adapter's
own included) are answered 2xx and ignored. A signed payload that cannot be read is dead-lettered
with the reason and answered 400 naming it (GitHub shows it under the webhook's Recent Deliveries).

Outbound: the first partial answer is posted as a comment (a reply in its review thread, for a diff
comment), marked as still being written, edited as the answer streams (`channels.github.api` keeps
within GitHub's secondary limits) and finished with the final text, unmarked; presented files are
linked under it (to the gateway's artifact route, with `files_base_url`), as a GitHub comment
cannot carry files.

Every copy serves the webhook (GitHub needs no connection of ours, and a delivery is published
once whichever copy takes it); copies on one host share the port (`SO_REUSEPORT`). Replies come
from one copy at a time, the holder of the lease `adapter.github`; a standby takes them over when
it dies and finishes its answer in the comment already shown.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

import httpx
from githubkit.webhooks import verify
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bus import Bus, Misconfigured
from bus.files import stage_chat_file
from bus.messages import FileRef, InboundMessage, OutboundMessage
from bus.tasks import cancel_and_wait
from channels.delivery import standby
from channels.delivery.inbound import store_inbound
from channels.delivery.reply_stream import ReplyStream
from channels.delivery.splitting import split_text
from channels.delivery.surface import Surface
from channels.delivery.unreadable import dead_letter_unreadable
from channels.errors import MalformedMessage
from channels.github.api import GitHubApi, Place
from channels.github.attachments import attachment_links, download
from channels.github.events import Mention, mentions, question, read_delivery
from channels.github.webhook import webhook_server
from config import AppConfig
from config.channels import GitHubConfig

log = logging.getLogger(__name__)

LIMIT = 60_000  # characters per comment: GitHub takes 65,536, the file links need room under it
CHANNEL = "github"
WRITING = "\n\n⏳ _writing…_"  # under a comment while its answer streams


class GitHubAdapter(Surface):
    def __init__(self, bus: Bus, settings: GitHubConfig, api: GitHubApi, login: str) -> None:
        self.bus = bus
        self.settings = settings
        self.api = api
        self.login = login  # who mentions name; the adapter's own comments are by it (or login[bot])
        self.secret = settings.resolved("webhook_secret") or ""
        self.repositories = {repo.lower() for repo in settings.repositories}
        self.http = httpx.AsyncClient(timeout=10.0)  # attachments' downloads

    # ------------------------------------------------------------------ inbound

    async def receive(self, request: Request) -> Response:
        """One webhook delivery (POST)."""
        body = await request.body()
        signature = request.headers.get("X-Hub-Signature-256", "")
        if not signature:
            return _refuse(401, "missing X-Hub-Signature-256 header: set the webhook's secret")
        if not signature.startswith("sha256=") or not verify(self.secret, body, signature):
            log.warning("github: refused a delivery whose signature does not hold")
            return _refuse(401, "X-Hub-Signature-256 does not match the payload (is the secret the same?)")
        event = request.headers.get("X-GitHub-Event", "")
        delivery = request.headers.get("X-GitHub-Delivery", "")
        for header, value in (("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery)):
            if not value:
                return _refuse(400, f"missing {header} header")
        if event == "ping":
            return JSONResponse({"ok": True, "pong": True})
        payload = body
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            payload = (parse_qs(body.decode(errors="replace")).get("payload") or [""])[0].encode()
        try:
            mention = read_delivery(event, delivery, payload)
        except MalformedMessage as exc:
            await dead_letter_unreadable(self.bus, CHANNEL, body, str(exc), delivery)
            return _refuse(400, f"unreadable delivery: {exc}")
        ignored = self._ignored(event, mention)
        if ignored:
            return JSONResponse({"ok": True, "ignored": ignored}, status_code=202)
        assert mention is not None
        try:
            await self._publish(mention)
        except Exception as exc:  # GitHub does not retry: a 503 marks it failed, to redeliver
            log.warning("github: delivery %s not put on the bus: %s", delivery, exc)
            return _refuse(503, "Antler could not take the delivery now; redeliver it later")
        return JSONResponse({"ok": True})

    def _ignored(self, event: str, mention: Mention | None) -> str | None:
        """Why a delivery asks the bot nothing (None: it does)."""
        if mention is None:
            return f"{event} deliveries of this action are not answered"
        if self.repositories and mention.repo.lower() not in self.repositories:
            return f"{mention.repo} is not in channels.github.repositories"
        if mention.author_is_bot or mention.author.lower() in (
            self.login.lower(),
            f"{self.login}[bot]".lower(),
        ):
            return "written by a bot"
        if self.settings.require_mention_in_groups and not mentions(mention.body, self.login):
            return f"@{self.login} is not mentioned"
        return None

    async def _publish(self, mention: Mention) -> None:
        inbound = InboundMessage(
            channel=CHANNEL,
            chat_id=mention.chat_id,
            user_id=mention.author,
            user_name=mention.author,
            message_id=mention.delivery,
            chat_type="group",
            mentioned=mentions(mention.body, self.login),
            text=question(mention, self.login),
            files=await self._files_in(mention),
            metadata={
                "repo": mention.repo,
                "number": mention.number,
                "installation_id": mention.installation_id,
                "review_comment_id": mention.review_comment_id,
                "url": mention.url,
            },
        )
        await store_inbound(self.bus, CHANNEL, inbound)
        log.info(
            "github: delivery %s (%s by %s) is on the bus", mention.delivery, mention.chat_id, mention.author
        )

    async def _files_in(self, mention: Mention) -> list[FileRef]:
        links = attachment_links(mention.body, self.settings.web_url)
        if not links:
            return []
        store = await self.bus.files()
        return [
            await stage_chat_file(
                store, CHANNEL, mention.chat_id, mention.delivery, found.name, found.data, found.content_type
            )
            for found in await download(self.http, links, self.settings.resolved("token"))
        ]

    # ------------------------------------------------------------------ outbound (a Surface)

    def split(self, text: str) -> list[str]:
        return split_text(text, LIMIT)

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """A new comment; one posted while the answer streams says it is still being written (its
        readers, and the notification GitHub sends them, see it is not the whole answer)."""
        place = _place(out)
        writing = out.kind == "partial"
        comment = await self.api.post(place, text + WRITING if writing else text)
        return {"comment": comment, "writing": writing, **place.__dict__}

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        """A streaming comment's newer text (still being written)."""
        await self._edit(ref, text + WRITING if ref.get("writing") else text)

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        """The final text (no longer "writing"), with the answer's files linked under it."""
        links = [self._link(out, file) for file in out.files if file.object_name]
        final = "\n\n".join([text, *(["\n".join(links)] if links else [])])
        if final != shown or ref.get("writing"):
            await self._edit(ref, final)

    async def _edit(self, ref: dict[str, Any], body: str) -> None:
        place = Place(**{k: v for k, v in ref.items() if k not in ("comment", "writing")})
        await self.api.edit(place, int(ref["comment"]), body)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        await self.api.post(_place(out), text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        return None  # linked in the final comment (`finish`): a comment cannot carry a file

    def _link(self, out: OutboundMessage, file: FileRef) -> str:
        base = (self.settings.files_base_url or "").rstrip("/")
        if base and out.thread_id and file.path:
            return f"📎 [{file.name}]({base}/api/threads/{out.thread_id}/artifacts{file.path})"
        return f"📎 {file.name} (in Antler's thread {out.thread_id or '?'}, {file.path or file.name})"


def _place(out: OutboundMessage) -> Place:
    meta = out.metadata
    try:
        return Place(
            repo=str(meta["repo"]),
            number=int(meta["number"]),
            installation_id=int(meta["installation_id"]) if meta.get("installation_id") else None,
            review_comment_id=int(meta["review_comment_id"]) if meta.get("review_comment_id") else None,
        )
    except (KeyError, TypeError, ValueError) as exc:  # a reply the router made for no GitHub message
        repo, _, number = out.chat_id.rpartition("#")
        if not repo or not number.isdigit():
            raise MalformedMessage(f"a reply for chat {out.chat_id!r}, not owner/name#number") from exc
        return Place(repo=repo, number=int(number))


def _refuse(status: int, error: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error}, status_code=status)


async def run(bus: Bus, config: AppConfig) -> None:
    """The GitHub adapter component: the webhook served by every copy, the replies by the one
    holding the lease `adapter.github`, until cancelled. Credentials GitHub refuses, or no webhook
    secret, are `Misconfigured`."""
    settings = config.channels.github
    if not settings.resolved("webhook_secret"):
        raise Misconfigured("channels.github.webhook_secret is not set: deliveries could not be checked")
    api = GitHubApi(settings)
    login = settings.bot_login or await api.login()
    adapter = GitHubAdapter(bus, settings, api, login)
    log.info("github adapter: answering mentions of @%s", login)
    async with webhook_server(
        settings.webhook_path, settings.webhook_listen, settings.webhook_port, adapter.receive
    ) as serving:
        replies = asyncio.create_task(
            standby.deliver_replies_while_active(
                bus, CHANNEL, config.bus.lease_seconds, lambda: ReplyStream(bus, CHANNEL, adapter).deliver
            ),
            name="github-replies",
        )
        try:
            done, _ = await asyncio.wait([serving, replies], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            raise RuntimeError("the github webhook server stopped")
        finally:
            await cancel_and_wait(replies)
            await adapter.http.aclose()
