"""GitHub's webhook deliveries, read: which ones ask the bot something, and what.

A delivery is an event name (`X-GitHub-Event`), its id (`X-GitHub-Delivery`, kept when GitHub or an
operator delivers it again) and a JSON payload (shapes from GitHub's "Webhook events and payloads").
Three events can ask the bot: a new comment on an issue or a pull request (`issue_comment`,
`created`), a new comment on a pull request's diff (`pull_request_review_comment`, `created`) and
a new issue (`issues`, `opened`: its title and body). Each is validated here, at the boundary, into a
`Mention`; raw payloads go no further. Only the fields the adapter uses are read (GitHub adds fields
over time), and a payload that lacks one of them is `MalformedMessage` naming it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from channels.errors import MalformedMessage

#: event -> the actions that can ask the bot something; other events and actions are not for us
ASKING = {
    "issue_comment": {"created"},
    "pull_request_review_comment": {"created"},
    "issues": {"opened"},
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _User(_Model):
    login: str
    id: int
    type: str = "User"


class _Repository(_Model):
    full_name: str


class _Installation(_Model):
    id: int


class _Issue(_Model):
    number: int
    title: str = ""
    body: str | None = None
    user: _User
    html_url: str = ""
    pull_request: dict[str, Any] | None = None  # present when the issue is a pull request


class _Comment(_Model):
    id: int
    body: str | None = None
    user: _User
    html_url: str = ""
    path: str | None = None  # a diff comment's file, line and hunk
    line: int | None = None
    diff_hunk: str | None = None


class _Pull(_Model):
    number: int
    title: str = ""


class _Event(_Model):
    action: str
    repository: _Repository
    installation: _Installation | None = None


class _IssueComment(_Event):
    issue: _Issue
    comment: _Comment


class _ReviewComment(_Event):
    pull_request: _Pull
    comment: _Comment


class _IssueOpened(_Event):
    issue: _Issue


@dataclass(frozen=True)
class Mention:
    """A delivery that may ask the bot something: where it was written, by whom, and the text."""

    delivery: str
    repo: str  # owner/name
    number: int  # the issue's or pull request's
    pull: bool
    author: str
    author_is_bot: bool
    body: str  # as written (the mention still in it)
    url: str
    title: str = ""  # the issue's or pull request's
    installation_id: int | None = None
    review_comment_id: int | None = None  # a comment on a diff: answered in its review thread
    diff: str = ""  # a diff comment's place: the file, the line and the hunk it is about

    @property
    def chat_id(self) -> str:
        """One Antler chat (and thread) per issue or pull request."""
        return f"{self.repo}#{self.number}"


def read_delivery(event: str, delivery: str, body: bytes) -> Mention | None:
    """The delivery as a `Mention`; None if it is an event or action that asks nothing.

    Raises:
        MalformedMessage: the payload is not JSON, or lacks (or mistypes) a field it needs.
    """
    actions = ASKING.get(event)
    if actions is None:
        return None
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise MalformedMessage(f"the {event} payload is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise MalformedMessage(f"the {event} payload is not a JSON object")
    if payload.get("action") not in actions:
        return None
    try:
        if event == "issue_comment":
            commented = _IssueComment.model_validate(payload)
            issue = commented.issue
            return _mention(
                delivery,
                commented,
                issue.number,
                issue.title,
                issue.pull_request is not None,
                commented.comment,
            )
        if event == "pull_request_review_comment":
            review = _ReviewComment.model_validate(payload)
            pull, comment = review.pull_request, review.comment
            mention = _mention(delivery, review, pull.number, pull.title, True, comment)
            return replace(mention, review_comment_id=comment.id, diff=_diff(comment))
        opened = _IssueOpened.model_validate(payload)
    except ValidationError as exc:
        raise MalformedMessage(f"{event}: {_first_error(exc)}") from exc
    issue = opened.issue
    return Mention(
        delivery=delivery,
        repo=opened.repository.full_name,
        number=issue.number,
        pull=issue.pull_request is not None,
        author=issue.user.login,
        author_is_bot=issue.user.type == "Bot",
        body="\n\n".join(part for part in (issue.title, issue.body or "") if part),
        url=issue.html_url,
        installation_id=opened.installation.id if opened.installation else None,
    )


def _mention(delivery: str, event: _Event, number: int, title: str, pull: bool, comment: _Comment) -> Mention:
    return Mention(
        delivery=delivery,
        repo=event.repository.full_name,
        number=number,
        pull=pull,
        author=comment.user.login,
        author_is_bot=comment.user.type == "Bot",
        body=comment.body or "",
        url=comment.html_url,
        title=title,
        installation_id=event.installation.id if event.installation else None,
    )


def _diff(comment: _Comment) -> str:
    place = f"{comment.path}" + (f" line {comment.line}" if comment.line else "") if comment.path else ""
    hunk = f"```diff\n{comment.diff_hunk}\n```" if comment.diff_hunk else ""
    return "\n".join(part for part in (place and f"On {place}:", hunk) if part)


def question(mention: Mention, login: str) -> str:
    """What the agent is asked: a comment's words (the mention taken out), after a line saying which
    issue or pull request it is on (and, for a diff comment, the code it is about); a new issue as
    its title and body; a command as typed."""
    text = without_mention(mention.body, login)
    if not mention.title or text.startswith("/"):
        return text  # a command (`@bot /status`) goes to the router as typed
    kind = "pull request" if mention.pull else "issue"
    header = f"(GitHub {kind} {mention.chat_id}: {mention.title})"
    return "\n\n".join(part for part in (header, mention.diff, text) if part)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    return f"field {field}: {error['msg'].lower()}"


def mentions(body: str, login: str) -> bool:
    """Whether `body` @-mentions `login`: whole logins only (`@antler` is not `@antler-dev`, nor
    `me@antler.dev`), in any case, as GitHub matches them."""
    return _pattern(login).search(body) is not None


def without_mention(body: str, login: str) -> str:
    """The text with the bot's @-mentions taken out (with the spaces after them)."""
    return _pattern(login).sub(lambda m: m.group(1), body).strip()


def _pattern(login: str) -> re.Pattern[str]:
    return re.compile(rf"(^|[^A-Za-z0-9-])@{re.escape(login)}(?![A-Za-z0-9-])[,:]?[ \t]*", re.IGNORECASE)
