"""Two copies of the Slack, Feishu and DingTalk adapters, both connected to the platform's fake.

Each platform hands an event to one connection and sends it again, to any, if it is not
acknowledged; the fakes do the same. One copy delivers the replies (it holds the adapter's lease).
With both copies running, a message the platform sends to each copy is answered once, in one
message, even when the platform is slow to confirm the post the answer starts with. Then the copy
answering is killed mid-answer while it also holds a user's message it had not handed to the bus:
the other copy gets that message again and answers it once, and finishes the first answer in the
message already shown.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio

from bus import Bus, decode
from bus.messages import OutboundMessage
from tests.channels.conftest import StartCopies, copy_logs, lease_holder
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.feishu_server import APP_ID, APP_SECRET, FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.slack_server import FakeSlack

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(200)]

FIRST = "alpha beta gamma delta epsilon"
ANSWER = "one two three four five six seven eight nine ten eleven twelve"


@dataclass
class Platform:
    """What the tests need of one platform's fake: how a user writes, and what the user sees."""

    name: str
    fake: FakeSlack | FakeFeishu | FakeDingTalk
    settings: dict[str, Any]
    post: str  # the call that shows the first words of an answer (a new message or card)
    sent: int = 0

    def send(self, text: str, *, to: str | None = None, attachment: bool = False) -> Any:
        """A user's private message (with a file, if `attachment`); returns what `resend` takes."""
        fake = self.fake
        self.sent += 1
        if isinstance(fake, FakeSlack):
            event = {"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": text}
            event["ts"] = f"17000000{self.sent:02d}.000100"
            if attachment:
                event |= {"subtype": "file_share", "files": [fake.share_file("notes.txt", b"some notes")]}
            return fake.send_event(event, to=to)
        if isinstance(fake, FakeFeishu):
            if attachment:
                fake.add_resource("file_k1", b"some notes", "text/plain", "notes.txt")
                content = {"file_key": "file_k1", "file_name": "notes.txt"}
                return fake.send_message(text, message_type="file", content=content, to=to)
            return fake.send_message(text, to=to)
        assert isinstance(fake, FakeDingTalk)
        if attachment:
            fake.add_file("code-1", b"some notes", "text/plain")
            content = {"downloadCode": "code-1", "fileName": "notes.txt"}
            return fake.send_robot_message(text, msgtype="file", content=content, to=to)
        return fake.send_robot_message(text, to=to)

    def resend(self, sent: Any) -> None:
        """The platform sending the same message again (no acknowledgement came in time)."""
        if isinstance(self.fake, FakeSlack):
            self.fake.resend(sent)
        elif isinstance(self.fake, FakeFeishu):
            self.fake.send_event(sent)
        else:
            assert isinstance(self.fake, FakeDingTalk)
            self.fake.send_frame(
                {**sent, "headers": {**sent["headers"], "messageId": f"{sent['headers']['messageId']}-again"}}
            )

    def messages(self) -> dict[str, list[str]]:
        """Every message (card) the bot showed, by id, with the texts it showed in turn."""
        shown: dict[str, list[str]] = {}
        cards: dict[str, str] = {}  # a card's id -> the key of its latest creation in `shown`
        for call, params in self.fake.calls:
            if call == "chat.postMessage":
                shown[params["posted_ts"]] = [params["text"]]
            elif call == "chat.update":
                shown.setdefault(params["ts"], []).append(params["text"])
            elif call in ("reply", "create", "patch"):
                card = json.loads(params["content"])
                shown.setdefault(params["message_id"], []).append(card["elements"][0]["content"])
            elif call == "/v1.0/card/instances/createAndDeliver":  # a card; created twice: two cards
                track = params["outTrackId"]
                cards[track] = track if track not in shown else f"{track} (again)"
                shown[cards[track]] = []
            elif call == "/v1.0/card/streaming":
                shown.setdefault(cards.get(params["outTrackId"], params["outTrackId"]), []).append(
                    params["content"]
                )
        if isinstance(self.fake, FakeDingTalk):  # Markdown replies: each a message of its own
            for n, (_, body) in enumerate(self.fake.replies):
                shown[f"markdown-{n}"] = [body["markdown"]["text"]]
        return shown

    def showing(self, text: str) -> list[str]:
        """The messages whose latest text is `text`."""
        return [key for key, texts in self.messages().items() if texts and texts[-1] == text]


@pytest_asyncio.fixture(params=["slack", "feishu", "dingtalk"])
async def platform(request: pytest.FixtureRequest) -> AsyncIterator[Platform]:
    name = request.param
    if name == "slack":
        async with FakeSlack() as slack:
            settings = {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": slack.base_url}
            yield Platform(name, slack, settings, "chat.postMessage")
    elif name == "feishu":
        async with FakeFeishu() as feishu:
            settings = {"app_id": APP_ID, "app_secret": APP_SECRET, "domain": feishu.base_url}
            yield Platform(name, feishu, settings, "reply")
    else:
        async with FakeDingTalk() as dingtalk:
            settings = {
                "client_id": "ding-id",
                "client_secret": "ding-secret",
                "base_url": dingtalk.base_url,
                "card_template_id": "tpl-1.schema",  # an AI card streams the answer
            }
            yield Platform(name, dingtalk, settings, "/v1.0/card/instances/createAndDeliver")


@pytest_asyncio.fixture
async def two_copies(
    platform: Platform, tmp_path: Path, start_copies: StartCopies
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """Router, runner and two `antler run <platform>` processes, both connected to the fake."""
    async with start_copies(platform.name, platform.settings) as copies:
        await platform.fake.wait(lambda: platform.fake.connections >= 2, timeout=60)
        yield copies
        print(copy_logs(tmp_path, platform.name, 2000))  # shown if the test failed


def connection_of(pid: int, platform: Platform) -> str:
    """The `host:port` of the platform connection (WebSocket) of process `pid`, as the fake sees it."""
    ours = {
        f"{conn.laddr.ip}:{conn.laddr.port}"
        for conn in psutil.Process(pid).net_connections(kind="tcp")
        if conn.raddr and conn.raddr.port == platform.fake.port
    }
    found = ours & set(platform.fake.outbox.clients)
    assert len(found) == 1, (
        f"process {pid}: connections {ours}, the platform's {platform.fake.outbox.clients}"
    )
    return found.pop()


async def wait_until(condition: Callable[[], bool], what: str, platform: Platform) -> None:
    for _ in range(1200):
        if condition():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"{what}: {platform.messages()}")


async def test_two_copies_answer_each_message_once_and_one_finishes_what_the_killed_one_began(
    bus: Bus, platform: Platform, fake_model: FakeOpenAI, two_copies: list[asyncio.subprocess.Process]
) -> None:
    """(One test, not two: each starts the whole stack and two adapter processes.)"""
    fake_model.script(
        Reply(text=FIRST, when="hello twice", chunk_delay=0.1),
        Reply(text=ANSWER, when="tell me slowly", chunk_delay=0.4),
        Reply(text="still here", when="notes.txt"),
    )
    await a_message_sent_to_both_copies_is_answered_once_in_one_message(bus, platform)
    assert len(fake_model.agent_requests) == 1, "the message sent twice became one run"
    await the_copy_answering_killed_mid_answer_leaves_the_reply_completed_once(bus, platform, two_copies)
    assert len(fake_model.agent_requests) == 3, "each message became one run"


async def a_message_sent_to_both_copies_is_answered_once_in_one_message(bus: Bus, platform: Platform) -> None:
    finals: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def on_reply(msg: Any) -> None:
        reply = decode(OutboundMessage, msg.data)
        if reply.kind != "partial":
            finals.put_nowait(reply)

    replies = await bus.nc.subscribe(bus.subjects.chat_out(platform.name), cb=on_reply)
    # The platform is slow to confirm the message the answer starts with, and sends the user's
    # message to both copies (the first copy's acknowledgement came too late).
    slow = platform.fake.hold(platform.post)
    sent = platform.send("hello twice")
    platform.resend(sent)
    await asyncio.wait_for(finals.get(), 60)  # the whole answer is out of the router
    await replies.unsubscribe()
    stream, durable = bus.subjects.chat_out_stream, platform.name
    for _ in range(600):  # and taken by the adapters, all but what waits for the slow post
        info = await bus.js.consumer_info(stream, durable)
        if info.num_pending == 0 and info.num_ack_pending <= 1:
            break
        await asyncio.sleep(0.05)
    slow.set()
    await wait_until(lambda: bool(platform.showing(FIRST)), "the answer was not finished", platform)
    assert len(platform.messages()) == 1, f"one message for the answer: {platform.messages()}"
    assert len(set(platform.fake.outbox.receivers.values())) == 2, "the message reached both copies"


async def the_copy_answering_killed_mid_answer_leaves_the_reply_completed_once(
    bus: Bus, platform: Platform, two_copies: list[asyncio.subprocess.Process]
) -> None:
    platform.send("tell me slowly")
    # Once the message shown has been edited, the copy answering has recorded it (killed between
    # the platform's answer to its first post and that record, no copy could know it exists).
    await wait_until(lambda: any(len(t) >= 2 for t in answers(platform).values()), "no edit", platform)
    answering = await lease_holder(bus, platform.name, two_copies)  # the copy delivering replies
    # A message reaches the copy answering too; it is killed while it fetches the file attached,
    # before the bus (or the platform) heard from it.
    download = "resource" if isinstance(platform.fake, FakeFeishu) else "download"
    held = platform.fake.hold(download)
    platform.send("and now?", to=connection_of(answering.pid, platform), attachment=True)
    await platform.fake.wait(lambda: download in platform.fake.holding, timeout=60)
    os.kill(answering.pid, signal.SIGKILL)
    held.set()
    await wait_until(
        lambda: bool(platform.showing(ANSWER)) and bool(platform.showing("still here")),
        "the other copy did not finish",
        platform,
    )
    assert len(platform.showing("still here")) == 1, "the message sent again is answered once"
    started = list(answers(platform))
    assert started == platform.showing(ANSWER), "the answer is finished in the message it started in"
    assert len(started) == 1, f"one message for the answer: {platform.messages()}"


def answers(platform: Platform) -> dict[str, list[str]]:
    """The messages that showed some of ANSWER."""
    shown = platform.messages().items()
    return {key: texts for key, texts in shown if any(text and ANSWER.startswith(text) for text in texts)}
