"""Microsoft Teams end to end: the adapter's messaging endpoint (its JWTs checked by the Microsoft
365 Agents SDK) and the Bot Connector reached through the SDK's connector client, against a fake
Teams written from Microsoft's documentation, through router and runner."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from bus import Bus, list_dead_letters
from channels.msteams import run as run_msteams
from config import AppConfig
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.support.adapters import StartAdapter
from tests.support.ports import free_port

OUT = "/mnt/user-data/outputs"
CHANNEL = "19:3c1d0f5e8a2b4f6e9d7c@thread.tacv2"


def asked(fake_model: FakeOpenAI) -> list[str]:
    return [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]


def sent_cards(teams: FakeTeams, kind: str) -> list[dict[str, Any]]:
    """The attachments of the bot's messages whose content type names `kind`."""
    return [a for m in teams.bot_messages() for a in m.get("attachments") or [] if kind in a["contentType"]]


async def _until(teams: FakeTeams, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    try:
        await teams.wait(condition, timeout)
    except TimeoutError:
        raise AssertionError(f"{what}; the bot's messages: {teams.bot_messages()}") from None


async def test_a_personal_chat_is_answered_streamed_by_updates_of_one_message(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    answer = "The **capital** of France is `Paris`, and it has been for a very long time indeed."
    fake_model.script(Reply(text=answer, chunk_delay=0.1))
    question = teams.activity("What is the capital of France?")
    taken = await teams.post(question)
    assert taken.status_code == 200
    await _until(teams, lambda: [m["text"] for m in teams.bot_messages()] == [answer], "not answered")
    (reply,) = teams.bot_messages("a:1personal-chat")
    assert reply["type"] == "message"
    assert reply["from"]["id"] == teams.bot_id, "from the bot"
    assert reply["recipient"]["id"] == question["from"]["id"], "to the asker"
    assert reply["replyToId"] == question["id"], "answering the question"
    shown = [reply["edits"][0] if reply["edits"] else reply["text"], *reply["edits"][1:], reply["text"]]
    assert len(reply["edits"]) >= 1, "streamed: sent, then updated in place"
    assert all(answer.startswith(text) for text in shown), f"each update a longer beginning: {shown}"
    assert "a:1personal-chat" in teams.typing, "the bot showed it was typing"
    assert asked(fake_model) == ["What is the capital of France?"]


async def test_a_channel_message_needs_a_mention_and_is_answered_in_its_reply_chain(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="In the chain.", when="help me"), Reply(text="Next post.", when="and this"))
    chain = f"{CHANNEL};messageid=1700000000001"
    ignored = await teams.say("chatter among humans", conversation=chain, kind="channel")
    assert ignored.status_code == 200
    await teams.say("help me", conversation=chain, kind="channel", mention=True)
    await _until(teams, lambda: len(teams.bot_messages()) == 1, "the mention was not answered")
    other = f"{CHANNEL};messageid=1700000000002"
    await teams.say("and this", conversation=other, kind="channel", mention=True)
    await _until(teams, lambda: len(teams.bot_messages()) == 2, "the second post was not answered")
    assert [m["text"] for m in teams.bot_messages(chain)] == ["In the chain."], "answered in the reply chain"
    assert [m["text"] for m in teams.bot_messages(other)] == ["Next post."]
    assert asked(fake_model) == ["help me", "and this"], "the chatter ran nothing; the mention is not asked"
    assert "<at>" not in json.dumps(fake_model.agent_requests)
    assert "help me" not in json.dumps(fake_model.agent_requests[1]["messages"]), "each post its own thread"


async def test_with_mentions_not_required_every_channel_message_is_answered(
    teams: FakeTeams, fake_model: FakeOpenAI, start_adapter: StartAdapter
) -> None:
    settings = {**teams.settings(free_port()), "require_mention_in_groups": False}
    async with start_adapter("msteams", settings, run_msteams):
        fake_model.script(Reply(text="Heard you."))
        await teams.say("anyone around?", conversation=f"{CHANNEL};messageid=1700000000003", kind="channel")
        await _until(teams, lambda: len(teams.bot_messages()) == 1, "the channel message was not answered")
    assert asked(fake_model) == ["anyone around?"]


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(None, id="missing"),
        pytest.param("not-a-jwt", id="garbage"),
        pytest.param("forged-key", id="signed-by-another-key"),
        pytest.param("other-audience", id="for-another-bot"),
        pytest.param("expired", id="expired"),
        pytest.param("other-service-url", id="answers-sent-elsewhere"),
    ],
)
async def test_a_request_without_a_valid_bot_framework_token_is_refused_with_401(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig, bus: Bus, token: str | None
) -> None:
    tokens = {
        None: None,
        "not-a-jwt": "not-a-jwt",
        "forged-key": teams.signed(key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "other-audience": teams.signed(aud="00000000-0000-0000-0000-000000000000"),
        "expired": teams.signed(exp=1_600_000_000, nbf=1_599_990_000),
        "other-service-url": teams.signed(serviceurl="https://attacker.example/"),
    }
    refused = await teams.post(teams.activity("do something"), token=tokens[token])
    assert refused.status_code == 401
    fake_model.script(Reply(text="Genuine."))
    await teams.say("genuine")
    await _until(teams, lambda: len(teams.bot_messages()) == 1, "the genuine message was not answered")
    assert asked(fake_model) == ["genuine"], "the refused request reached nothing"
    assert await list_dead_letters(bus) == []


async def test_a_rate_limited_conversation_waits_without_holding_up_another(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Worth the wait.", when="first"), Reply(text="Right away.", when="second"))
    teams.flood.arm("conversation", 6, key="a:1personal-chat")  # its next call: 429, Retry-After 6
    await teams.say("first")
    await teams.wait_for("throttled")
    await teams.say("second", conversation="a:1other-chat", user="29:1user-adele")
    await _until(teams, lambda: len(teams.bot_messages("a:1other-chat")) == 1, "the other chat waited")
    assert teams.bot_messages("a:1personal-chat") == [], "the limited chat is still waiting"
    await _until(teams, lambda: len(teams.bot_messages("a:1personal-chat")) == 1, "the answer was lost", 40)
    assert [m["text"] for m in teams.bot_messages("a:1personal-chat")] == ["Worth the wait."]
    assert [m["text"] for m in teams.bot_messages("a:1other-chat")] == ["Right away."]
    assert teams.throttled == ["a:1personal-chat"], "no call came before the announced wait was over"


async def test_a_failing_connector_and_an_expired_token_delay_the_answer_but_lose_nothing(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="First."), Reply(text="Second."))
    teams.break_method("sendToConversation", 2)  # the Bot Connector's 502s
    await teams.say("one")
    await _until(teams, lambda: [m["text"] for m in teams.bot_messages()] == ["First."], "lost after a 502")
    teams.expire_tokens()
    await teams.say("two")
    await _until(teams, lambda: len(teams.bot_messages()) == 2, "lost after the token expired")
    assert [m["text"] for m in teams.bot_messages()] == ["First.", "Second."]
    assert len(await teams.wait_for("token", count=2)) >= 2, "a new connector token was fetched"


async def test_the_same_activity_posted_twice_is_answered_once(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    activity = teams.activity("hello")
    first, again = await teams.post(activity), await teams.post(activity)
    assert (first.status_code, again.status_code) == (200, 200)
    await teams.say("last one")
    await _until(teams, lambda: len(teams.bot_messages()) == 2, "not answered")
    assert asked(fake_model) == ["hello", "last one"], "the retry ran nothing"


async def test_a_body_that_is_not_an_activity_is_refused_and_dead_lettered(
    teams: FakeTeams, teams_stack: AppConfig, bus: Bus
) -> None:
    answer = await teams.post(b'{"type": "message", "conversation": "not an object"}')
    assert answer.status_code == 400
    assert "conversation" in answer.json()["error"]
    (kept,) = await list_dead_letters(bus)
    assert kept.consumer == "msteams-adapter"
    assert "conversation" in kept.reason


async def test_files_go_both_ways(teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    encoded = base64.b64encode(png).decode()
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/minutes.txt"})]),
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo {encoded} | base64 -d > {OUT}/dot.png"})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [f"{OUT}/dot.png"]})]),
        Reply(text="Ship on Friday; a picture attached."),
    )
    shared = teams.share_file("minutes.txt", b"Decision: ship on Friday.")
    await teams.say("what was decided?", attachments=[shared])
    await _until(
        teams, lambda: any(m.get("attachments") for m in teams.bot_messages()), "no picture came back"
    )
    first = asked(fake_model)[0]
    assert first.startswith("what was decided?")
    assert "/mnt/user-data/uploads/minutes.txt" in first
    assert asked(fake_model)[1] == "Decision: ship on Friday."
    messages = teams.bot_messages()
    assert messages[0]["text"] == "Ship on Friday; a picture attached."
    (picture,) = messages[-1]["attachments"]
    assert picture["contentType"] == "image/png"
    assert picture["contentUrl"] == f"data:image/png;base64,{encoded}"


async def test_a_pasted_picture_is_read_with_the_bots_token_and_the_html_beside_it_is_skipped(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="A single dot."))
    await teams.say("what is this?", attachments=teams.paste_image(b"\x89PNG fake picture"))
    await _until(teams, lambda: len(teams.bot_messages()) == 1, "not answered")
    question = asked(fake_model)[0]
    assert question.startswith("what is this?")
    assert "/mnt/user-data/uploads/image_" in question
    assert ".png" in question, "named after the picture's type"
    assert question.count("/mnt/user-data/uploads/") == 1, "the message's HTML is no file"


async def test_a_long_answer_continues_in_messages_teams_takes(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    paragraphs = [f"Paragraph {n}: " + "words and more words " * 40 for n in range(30)]
    answer = "\n\n".join(paragraphs)
    assert len(answer) > 20_000
    fake_model.script(Reply(text=answer))
    await teams.say("tell me everything")
    await _until(
        teams,
        lambda: (
            "".join(m["text"] for m in teams.bot_messages()).replace("\n", "") == answer.replace("\n", "")
        ),
        "the long answer did not arrive whole",
    )
    pieces = [m["text"] for m in teams.bot_messages()]
    assert len(pieces) >= 3
    assert all(len(p) <= 7000 for p in pieces)
    assert all(p.startswith("Paragraph") for p in pieces), "cut at paragraph ends"


async def test_a_file_is_offered_in_a_personal_chat_and_uploaded_once_the_user_accepts(
    teams: FakeTeams, fake_model: FakeOpenAI, teams_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": f"{OUT}/notes.md", "content": "# Ship\n"})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [f"{OUT}/notes.md"]})]),
        Reply(text="Notes attached."),
    )
    await teams.say("write the notes")

    await _until(teams, lambda: bool(sent_cards(teams, "consent")), "no file was offered")
    (card,) = sent_cards(teams, "consent")
    assert card["contentType"] == "application/vnd.microsoft.teams.card.file.consent"
    assert (card["name"], card["content"]["sizeInBytes"]) == ("notes.md", 7)
    accepted = await teams.accept_file(card)
    assert accepted.status_code == 200
    assert teams.uploaded == {"notes.md": b"# Ship\n"}, "the file is in the user's OneDrive"
    (info,) = sent_cards(teams, "file.info")
    assert info["name"] == "notes.md"
    assert info["contentUrl"].endswith("/Documents/Applications/notes.md")
