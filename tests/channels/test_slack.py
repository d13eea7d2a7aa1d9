"""Slack end to end: slack-bolt in Socket Mode against a fake Slack, through router and runner."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.slack import mrkdwn
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.fakes.slack_server import BOT_USER, FakeSlack
from tests.support.adapters import the_agent_read


def dm(text: str, ts: str = "1700000000.000100") -> dict[str, Any]:
    return {"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": text, "ts": ts}


async def test_a_dm_is_answered_plainly_streamed_by_updates(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Here is **the** answer.", chunk_delay=0.1))
    envelope = slack.send_event(dm("hello bot"))
    posted = await slack.wait_for("chat.postMessage")
    assert posted[0]["channel"] == "D1"
    assert "thread_ts" not in posted[0], "a direct message gets a plain reply, not a thread"
    for _ in range(100):
        updates = [p for m, p in slack.calls if m == "chat.update"]
        if updates and updates[-1]["text"] == "Here is *the* answer.":
            break
        await asyncio.sleep(0.1)
    assert updates[-1]["text"] == "Here is *the* answer."
    assert len([m for m, _ in slack.calls if m == "chat.postMessage"]) == 1, "one reply, updated in place"
    assert envelope["envelope_id"] in slack.acks


async def test_a_dm_written_in_a_thread_is_answered_in_that_thread(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    event = dm("and a follow-up", ts="1700000005.000600")
    event["thread_ts"] = "1700000004.000500"
    slack.send_event(event)
    posted = await slack.wait_for("chat.postMessage")
    assert posted[0]["thread_ts"] == "1700000004.000500"


async def test_a_mention_arriving_twice_gets_one_answer_and_chatter_none(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    base = {"channel": "C1", "user": "U1", "ts": "1700000001.000200"}
    slack.send_event(
        {"type": "message", "channel_type": "channel", "text": "lunch anyone?", **base, "ts": "1.1"}
    )
    text = f"<@{BOT_USER}> summarize the plan"
    slack.send_event({"type": "app_mention", "text": text, **base})
    slack.send_event({"type": "message", "channel_type": "channel", "text": text, **base})
    slack.send_event(dm("and one in private", ts="1700000002.000300"))
    await slack.wait_for("chat.postMessage", count=2)
    # The DM was sent last and is answered: nothing else is still coming for the earlier events.
    for _ in range(100):
        if (
            len([p for m, p in slack.calls if m in ("chat.update", "chat.postMessage")]) >= 2
            and len(fake_model.agent_requests) >= 2
        ):
            break
        await asyncio.sleep(0.05)
    # (Different chats are handled side by side: the two may reach the model in either order.)
    asked = sorted(unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests)
    assert asked == ["and one in private", "summarize the plan"]
    posts = {p["channel"]: p.get("thread_ts") for m, p in slack.calls if m == "chat.postMessage"}
    assert posts["C1"] == "1700000001.000200", "a channel answer goes into the mention's thread"


async def test_a_presented_file_is_uploaded_to_the_thread(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[ToolCall("write_file", {"path": "/mnt/user-data/outputs/r.csv", "content": "a,b\n"})]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/r.csv"]})]),
        Reply(text="Attached."),
    )
    slack.send_event(dm("export it"))
    completed = await slack.wait_for("files.completeUploadExternal")
    assert list(slack.uploads.values()) == [b"a,b\n"]
    assert completed[0]["channel_id"] == "D1"


async def test_a_file_shared_in_a_dm_reaches_the_agent_as_an_upload(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/todo.txt"})]),
        Reply(text="Two things to do."),
    )
    event = dm("what is on my list?")
    event.update(subtype="file_share", files=[slack.share_file("todo.txt", b"- buy milk\n- call mum\n")])
    slack.send_event(event)
    await slack.wait_for("chat.postMessage")
    the_agent_read(fake_model, "todo.txt", "- buy milk\n- call mum\n")


async def test_socket_mode_reconnects_after_the_link_breaks(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    slack.drop_connection()
    await asyncio.wait_for(slack.connected.wait(), 30)
    assert slack.connections == 2
    assert len(await slack.wait_for("apps.connections.open", count=2)) == 2, "a fresh URL for the new link"
    slack.send_event(dm("still there?", ts="1700000003.000400"))
    await slack.wait_for("chat.postMessage")
    assert unfenced(fake_model.agent_requests[0]["messages"][-1]["content"]) == "still there?"


async def test_a_slash_command_is_acknowledged_and_answered_like_the_same_text_in_a_dm(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    envelope = slack.send_command("/status")
    posted = await slack.wait_for("chat.postMessage")
    # Acknowledged, so Slack shows the user no error ("dispatch_failed").
    await slack.wait(lambda: envelope["envelope_id"] in slack.acks)
    assert posted[0]["channel"] == "D1"
    assert "Status: idle" in posted[0]["text"], "answered as /status typed in the DM is"
    assert fake_model.agent_requests == [], "a chat command runs no agent"


def test_markdown_becomes_mrkdwn() -> None:
    assert (
        mrkdwn("**bold** <tag> [site](https://x.io) `a<b`")
        == "*bold* &lt;tag&gt; <https://x.io|site> `a&lt;b`"
    )
