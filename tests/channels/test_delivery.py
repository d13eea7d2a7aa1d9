"""How every adapter delivers replies (`channels.delivery.reply_stream`), on each platform's own fake.

Replies are published on `<prefix>.chat.out.<channel>` as the router sends
them, and read back from what the fake platform received: the adapter runs
alone, so a test can stop it, let replies pile up, and start it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from bus.messages import FileRef, OutboundMessage
from channels.dingtalk import run as run_dingtalk
from channels.feishu import run as run_feishu
from channels.slack import run as run_slack
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.conftest import running_component
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.feishu_server import APP_ID, APP_SECRET, FakeFeishu
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram

PLATFORMS = ["telegram", "slack", "feishu", "dingtalk"]


@dataclass
class Platform:
    """One platform's fake, and how to read what a user there sees."""

    name: str
    fake: Any
    settings: dict[str, Any]
    entry: Callable[[Bus, AppConfig], Awaitable[None]]
    chat_id: str
    reply_to: str
    metadata: dict[str, Any]
    post_call: str  # the call that shows a new message
    edit_call: str  # the call that changes it
    ready: Callable[[], Awaitable[None]]

    def shown(self) -> list[str]:
        """Every text the platform was asked to show for the answer (new or edited), in order."""
        calls = self.fake.calls
        if self.name == "telegram":
            return [str(p["text"]) for m, p in calls if m in (self.post_call, self.edit_call)]
        if self.name == "slack":
            return [str(p["text"]) for m, p in calls if m in (self.post_call, self.edit_call)]
        if self.name == "feishu":
            return [text for _, text in self.fake.cards()]
        return [p["content"] for m, p in calls if m == self.edit_call]

    def pieces(self) -> list[str]:
        """The messages a final answer, sent without partials before it, arrived in."""
        if self.name == "dingtalk":  # the card holds the first piece; Markdown messages the rest
            card = [p["content"] for m, p in self.fake.calls if m == self.edit_call and p["isFinalize"]]
            return card + [body["markdown"]["text"] for _, body in self.fake.replies]
        return self.shown()

    def refusals(self, call: str, status: str) -> int:
        return [m for m, _ in self.fake.calls].count(f"{call}:{status}")


@pytest_asyncio.fixture(params=PLATFORMS)
async def platform(request: pytest.FixtureRequest) -> AsyncIterator[Platform]:
    name = request.param
    async with contextlib.AsyncExitStack() as stack:
        if name == "telegram":
            tg = await stack.enter_async_context(FakeTelegram())
            yield Platform(
                name,
                tg,
                {"bot_token": tg.token, "base_url": tg.base_url},
                run_telegram,
                "42",
                "7",
                {},
                "sendMessage",
                "editMessageText",
                lambda: tg.wait_for("getMe"),
            )
        elif name == "slack":
            sl = await stack.enter_async_context(FakeSlack())
            yield Platform(
                name,
                sl,
                {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": sl.base_url},
                run_slack,
                "D1",
                "1700000000.000100",
                {},
                "chat.postMessage",
                "chat.update",
                lambda: asyncio.wait_for(sl.connected.wait(), 20),
            )
        elif name == "feishu":
            fs = await stack.enter_async_context(FakeFeishu())
            yield Platform(
                name,
                fs,
                {"app_id": APP_ID, "app_secret": APP_SECRET, "domain": fs.base_url},
                run_feishu,
                "oc_chat1",
                "om_user1",
                {},
                "reply",
                "patch",
                lambda: fs.wait(lambda: fs.connections >= 1),
            )
        else:
            dt = await stack.enter_async_context(FakeDingTalk())
            yield Platform(
                name,
                dt,
                {
                    "client_id": "ding-id",
                    "client_secret": "ding-secret",
                    "base_url": dt.base_url,
                    "card_template_id": "tpl-1.schema",
                },
                run_dingtalk,
                "cid-1",
                "msg-1",
                {
                    "session_webhook": f"{dt.base_url}/webhook/cid-1",
                    "session_webhook_expires": time.time() + 5400,
                    "conversation_type": "1",
                    "sender_staff_id": "staff-7",
                    "robot_code": "robot-1",
                },
                "/v1.0/card/instances/createAndDeliver",
                "/v1.0/card/streaming",
                lambda: dt.wait(lambda: dt.connections >= 1),
            )


@pytest.fixture
def config(platform: Platform, config_data: dict[str, Any], app_config: Callable[[], AppConfig]) -> AppConfig:
    config_data["channels"] = {platform.name: {"enabled": True, **platform.settings}}
    return app_config()


class Replies:
    """Publishes one run's replies as the router does (to the platform's chat, or to `chat`)."""

    def __init__(
        self, bus: Bus, platform: Platform, chat: tuple[str, str, dict[str, Any]] | None = None
    ) -> None:
        self.bus = bus
        self.platform = platform
        self.chat_id, self.reply_to, self.metadata = chat or (
            platform.chat_id,
            platform.reply_to,
            platform.metadata,
        )
        self.run_id = "run-" + uuid.uuid4().hex[:8]
        self.seq = 0

    async def send(self, kind: str, text: str) -> None:
        self.seq += 1
        p = self.platform
        out = OutboundMessage(
            channel=p.name,
            chat_id=self.chat_id,
            reply_to=self.reply_to,
            thread_id="thread-1",
            run_id=self.run_id,
            kind=kind,  # type: ignore[arg-type]
            text=text,
            seq=self.seq,
            metadata=self.metadata,
        )
        msg_id = f"reply:{self.run_id}" if kind != "partial" else None
        await self.bus.publish(self.bus.subjects.chat_out(p.name), out, msg_id=msg_id)

    async def taken(self) -> None:
        """Until the adapter has taken every reply published so far off the bus."""
        stream = self.bus.subjects.chat_out_stream
        for _ in range(400):
            info = await self.bus.js.consumer_info(stream, self.platform.name)
            if not info.num_pending and not info.num_ack_pending:
                return
            await asyncio.sleep(0.025)
        raise TimeoutError("the adapter did not take its replies")


@contextlib.asynccontextmanager
async def adapter(nats_url: str, config: AppConfig, platform: Platform) -> AsyncIterator[None]:
    async with running_component(nats_url, config, platform.entry, platform.name):
        await platform.ready()
        yield


async def test_a_backlog_of_partials_after_a_restart_becomes_one_edit_with_the_newest_text(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    replies = Replies(bus, platform)
    async with adapter(nats_url, config, platform):
        await replies.send("partial", "Step 1")
        await platform.fake.wait(lambda: platform.shown() == ["Step 1"])
    # The adapter is away while the answer goes on streaming and ends.
    for n in range(2, 9):
        await replies.send("partial", "Step " + " ".join(str(i) for i in range(1, n + 1)))
    await replies.send("final", "Steps 1 to 8, done.")
    async with adapter(nats_url, config, platform):
        await platform.fake.wait(lambda: platform.shown()[-1:] == ["Steps 1 to 8, done."])
        await replies.taken()
    assert platform.shown() == ["Step 1", "Steps 1 to 8, done."], "no stale partial is shown on the way"


async def test_a_resumed_run_never_edits_the_answer_back_to_a_shorter_text(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    replies = Replies(bus, platform)
    told = "Once upon a time there lived a fox"
    async with adapter(nats_url, config, platform):
        for text in ("Once upon a time", told):
            await replies.send("partial", text)
            await platform.fake.wait(lambda text=text: platform.shown()[-1:] == [text])
        # The run is resumed after a crash and streams its answer again from the start.
        for text in ("Once", "Once upon a time", "Once upon a time there lived a fox who"):
            await replies.send("partial", text)
            await replies.taken()
        await replies.send("final", "Once upon a time there lived a fox who could talk.")
        await platform.fake.wait(lambda: platform.shown()[-1].endswith("could talk."))
    shown = platform.shown()
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(shown)), shown
    assert shown.count(told) == 1, "what the user read is not shown to them again"


async def test_a_rate_limited_reply_calls_again_only_when_the_platform_says_and_arrives(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    replies = Replies(bus, platform)
    async with adapter(nats_url, config, platform):
        await replies.send("partial", "Working")
        await platform.fake.wait(lambda: platform.shown() == ["Working"])
        platform.fake.flood.arm(platform.edit_call, 1)  # the next change trips the platform's limit
        for text in ("Working on", "Working on it", "Working on it now"):
            await replies.send("partial", text)
        await replies.send("final", "Here it is.")
        await platform.fake.wait(lambda: platform.shown()[-1:] == ["Here it is."], timeout=30)
    assert platform.refusals(platform.edit_call, "429") == 1, "nothing was tried again before its time"
    assert await list_dead_letters(bus) == [], "a rate limit is no reason to give an answer up"


async def test_a_final_answer_gets_through_server_errors_once(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    replies = Replies(bus, platform)
    platform.fake.break_method(platform.post_call, 2)
    async with adapter(nats_url, config, platform):
        await replies.send("final", "Made it through.")
        await platform.fake.wait(lambda: platform.shown()[-1:] == ["Made it through."], timeout=30)
        await replies.taken()
    status = "502" if platform.name == "telegram" else "500"
    assert platform.refusals(platform.post_call, status) == 2
    assert [m for m, _ in platform.fake.calls].count(platform.post_call) == 1, "posted once"
    assert await list_dead_letters(bus) == []


async def test_a_final_answer_the_user_already_sees_is_not_sent_again(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    if platform.name == "dingtalk":
        pytest.skip("an AI card is finished with its final text whatever it showed before")
    replies = Replies(bus, platform)
    async with adapter(nats_url, config, platform):
        await replies.send("partial", "All done.")
        await platform.fake.wait(lambda: platform.shown() == ["All done."])
        await replies.send("final", "All done.")
        await replies.send("partial", "All done, late")  # a partial overtaken by its final: not shown
        later = Replies(bus, platform)
        await later.send("final", "Next.")
        await platform.fake.wait(lambda: platform.shown()[-1:] == ["Next."])
    assert platform.shown().count("All done.") == 1
    assert [m for m, _ in platform.fake.calls].count(platform.edit_call) == 0, "no edit changing nothing"


def _story() -> str:
    lines = [f"Line {n:04d} of the story, with a few more words in it." for n in range(260)]
    code = [f"    value_{n:04d} = compute({n}, 'x' * {n})" for n in range(200)]
    return "\n".join(lines[:100]) + "\n\n```python\n" + "\n".join(code) + "\n```\n\n" + "\n".join(lines[100:])


async def test_a_long_answer_is_split_at_line_ends_with_code_blocks_closed_and_reopened(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    replies = Replies(bus, platform)
    story = _story()
    async with adapter(nats_url, config, platform):
        await replies.send("final", story)
        await platform.fake.wait(lambda: any("Line 0259" in piece for piece in platform.pieces()))
        await replies.taken()
    pieces = platform.pieces()
    assert len(pieces) >= 3
    assert not [m for m, _ in platform.fake.calls if ":" in m], "the platform refused nothing as too long"
    seen = re.sub(r"</?pre>", "\n", "\n".join(pieces))
    for line in story.splitlines():
        if line.strip() and not line.startswith("```"):
            assert re.search(rf"^{re.escape(_rendered(platform, line))}$", seen, re.MULTILINE), line
    for piece in pieces:
        if platform.name == "telegram":
            assert piece.count("<pre>") == piece.count("</pre>")
        else:
            fences = [line for line in piece.splitlines() if line.startswith("```")]
            assert len(fences) % 2 == 0, "every code block in a piece is closed in it"
    code_pieces = [p for p in pieces if "value_0100" in p or "value_0150" in p]
    assert code_pieces, "the code block spans pieces"
    for piece in code_pieces:
        assert "<pre>" in piece or "```python" in piece, "each piece of the block renders as code"


def _rendered(platform: Platform, line: str) -> str:
    if platform.name == "telegram":
        return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if platform.name == "slack":
        return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return line


# ---------------------------------------------------------------------- one chat's limit, not the others'


def _second_chat(platform: Platform) -> tuple[str, str, dict[str, Any]]:
    """Another chat on the same platform: (chat id, the user's message replied to, metadata)."""
    if platform.name == "telegram":
        return "43", "8", {}
    if platform.name == "slack":
        return "D2", "1700000001.000100", {}
    if platform.name == "feishu":
        return "oc_chat2", "om_user2", {}
    webhook = {"session_webhook": f"{platform.fake.base_url}/webhook/cid-2"}
    return "cid-2", "msg-2", {**platform.metadata, **webhook}


def _limit_chat(platform: Platform, chat_id: str, seconds: float) -> None:
    """The platform's own per-chat limit trips on the next message into `chat_id`."""
    fake = platform.fake
    if platform.name == "telegram":
        fake.flood.arm("sendMessage", seconds, key=chat_id)
    elif platform.name == "slack":
        fake.flood.arm("chat.postMessage", seconds, key=chat_id)
    elif platform.name == "feishu":
        fake.message_chats.update({platform.reply_to: platform.chat_id, "om_user2": "oc_chat2"})
        fake.limit_chat(chat_id, seconds)
    else:
        fake.flood.arm("webhook", seconds, key=chat_id)


def _events(platform: Platform) -> list[tuple[str, str, str]]:
    """(chat, "sent" or "refused", text) of each message the platform was asked to post, in order."""
    found = []
    for call, params in platform.fake.calls:
        method, _, refusal = call.partition(":")
        if platform.name == "telegram" and method == "sendMessage":
            chat, text = str(params["chat_id"]), str(params["text"])
        elif platform.name == "slack" and method == "chat.postMessage":
            chat, text = str(params["channel"]), str(params["text"])
        elif platform.name == "feishu" and method == "reply":
            chat = platform.fake.message_chats.get(params["reply_to"], "")
            text = json.loads(params["content"])["elements"][0]["content"]
        elif platform.name == "dingtalk" and method == "webhook":
            chat, text = str(params["conversation"]), str(params["markdown"]["text"])
        else:
            continue
        found.append((chat, "refused" if refusal else "sent", text))
    return found


@pytest.fixture
def markdown_config(
    platform: Platform, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AppConfig:
    """DingTalk without AI cards: replies go to the conversation's session webhook, which DingTalk
    limits per conversation (its Open API's limits are the app's)."""
    settings = {k: v for k, v in platform.settings.items() if k != "card_template_id"}
    config_data["channels"] = {platform.name: {"enabled": True, **settings}}
    return app_config()


async def test_a_chat_waiting_out_its_rate_limit_holds_no_other_chat(
    platform: Platform, markdown_config: AppConfig, bus: Bus, nats_url: str
) -> None:
    a, b = Replies(bus, platform), Replies(bus, platform, _second_chat(platform))
    async with adapter(nats_url, markdown_config, platform):
        _limit_chat(platform, a.chat_id, 30)
        await a.send("final", "The answer for A.")
        await platform.fake.wait(lambda: (a.chat_id, "refused", "The answer for A.") in _events(platform))
        await b.send("final", "The answer for B.")
        await platform.fake.wait(lambda: (b.chat_id, "sent", "The answer for B.") in _events(platform))
        events = _events(platform)
    assert (a.chat_id, "sent", "The answer for A.") not in events, "A's wait is not over yet"
    assert events.index((b.chat_id, "sent", "The answer for B.")) > events.index(
        (a.chat_id, "refused", "The answer for A.")
    ), "B's reply went out while A's waited"
    assert await list_dead_letters(bus) == [], "a rate limit is no reason to give an answer up"


async def test_a_chat_keeps_its_order_while_it_waits_and_across_a_restart(
    platform: Platform, markdown_config: AppConfig, bus: Bus, nats_url: str
) -> None:
    first, second = Replies(bus, platform), Replies(bus, platform)
    async with adapter(nats_url, markdown_config, platform):
        _limit_chat(platform, first.chat_id, 3)
        await first.send("final", "First answer.")
        await platform.fake.wait(lambda: (first.chat_id, "refused", "First answer.") in _events(platform))
        await second.send("final", "Second answer.")  # the adapter stops while both wait
    async with adapter(nats_url, markdown_config, platform):
        await platform.fake.wait(
            lambda: (first.chat_id, "sent", "Second answer.") in _events(platform), timeout=30
        )
        await second.taken()
    events = _events(platform)
    sent = [text for _, what, text in events if what == "sent"]
    assert sent == ["First answer.", "Second answer."], "in the order sent, each once"
    if platform.name in ("telegram", "slack"):  # they say how long to wait: no call comes before
        assert [what for _, what, _ in events] == ["refused", "sent", "sent"], events
    assert await list_dead_letters(bus) == []


async def test_a_limit_on_the_whole_app_holds_every_chat(
    platform: Platform, markdown_config: AppConfig, bus: Bus, nats_url: str
) -> None:
    if platform.name != "feishu":
        pytest.skip("Feishu's frequency limit (99991400) is the app's; the others here limit a chat")
    a, b = Replies(bus, platform), Replies(bus, platform, _second_chat(platform))
    platform.fake.message_chats.update({platform.reply_to: platform.chat_id, "om_user2": "oc_chat2"})
    async with adapter(nats_url, markdown_config, platform):
        platform.fake.flood.arm("reply", 2)  # the app's limit on sending replies
        await a.send("final", "The answer for A.")
        await platform.fake.wait(lambda: (a.chat_id, "refused", "The answer for A.") in _events(platform))
        await b.send("final", "The answer for B.")
        await platform.fake.wait(lambda: (b.chat_id, "sent", "The answer for B.") in _events(platform))
        await a.taken()
    events = _events(platform)
    assert [what for chat, what, _ in events if chat == b.chat_id] == ["sent"], (
        "B made no call while the app had to wait"
    )
    assert [what for chat, what, _ in events if chat == a.chat_id] == ["refused", "sent"]


async def test_a_file_gone_from_the_store_becomes_a_note_and_the_answer_still_arrives(
    platform: Platform, config: AppConfig, bus: Bus, nats_url: str
) -> None:
    """Every platform the same (the file is read once, by `ReplyStream`): the answer's text, then a
    note naming the file that could not be attached; nothing dead-lettered, nothing retried forever."""
    replies = Replies(bus, platform)
    out = OutboundMessage(
        channel=platform.name,
        chat_id=platform.chat_id,
        reply_to=platform.reply_to,
        thread_id="thread-1",
        run_id=replies.run_id,
        kind="final",
        text="Here is your report.",
        seq=1,
        metadata=platform.metadata,
        files=[FileRef(name="report.pdf", object_name="outputs/nobody/thread-1/report.pdf", size=10)],
    )
    async with adapter(nats_url, config, platform):
        await bus.publish(bus.subjects.chat_out(platform.name), out, msg_id=f"reply:{replies.run_id}")

        def seen() -> str:
            return json.dumps([platform.fake.calls, getattr(platform.fake, "replies", [])], default=str)

        await platform.fake.wait(lambda: "(I made report.pdf, but could not attach it.)" in seen())
        await replies.taken()
    assert "Here is your report." in seen()
    assert not await list_dead_letters(bus)
