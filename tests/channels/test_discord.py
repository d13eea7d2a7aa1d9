"""Discord end to end: the real discord.py (gateway, events, slash commands) and our REST calls
against a fake Discord that speaks its wire format, through router and runner."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from channels.discord import discord_commands
from channels.discord import run as run_discord
from config import AppConfig
from skills import SkillsCatalog
from tests.fakes.discord_server import BOT_ID, DM_CHANNEL, GENERAL, THREAD, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.support.adapters import StartAdapter, file_in_file_out


@pytest_asyncio.fixture
async def stack(discord: FakeDiscord, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Discord adapter connected to the fake, its commands registered."""
    settings = {"bot_token": discord.token, "base_url": discord.api_base}
    async with start_adapter("discord", settings, run_discord) as config:
        await discord.wait_for("overwriteCommands")
        yield config


async def _until(fake: FakeDiscord, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    try:
        await fake.wait(condition, timeout)
    except TimeoutError:
        raise AssertionError(f"{what}; the bot's messages: {fake.bot_messages()}") from None


async def test_a_dm_is_answered_streamed_by_edits_of_one_message(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    answer = "The **capital** of France is `Paris`, and it has been for a very long time."
    fake_model.script(Reply(text=answer, chunk_delay=0.1))
    asked = discord.user_message("What is the capital of France?")
    await _until(discord, lambda: [m["content"] for m in discord.bot_messages()] == [answer], "not answered")
    (reply,) = discord.bot_messages()
    assert reply["channel_id"] == DM_CHANNEL
    assert reply["message_reference"]["message_id"] == asked["id"], "a reply to the question"
    assert reply["allowed_mentions"] == {"parse": []}, "the model's text pings nobody"
    shown = [c["content"] for name, c in discord.calls if name == "createMessage"] + reply["edits"]
    assert len(shown) >= 2, "streamed: posted, then edited"
    assert all(answer.startswith(text) for text in shown), f"each edit a longer beginning: {shown}"
    assert [len(t) for t in shown] == sorted(len(t) for t in shown), "edits arrive in order"
    assert discord.refused == [], "within Discord's rate limits: never a 429"
    assert (
        unfenced(fake_model.agent_requests[0]["messages"][-1]["content"]) == "What is the capital of France?"
    )


async def test_a_guild_message_needs_a_mention_and_a_thread_is_its_own_conversation(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    fake_model.script(
        Reply(text="In the channel.", when="help me"), Reply(text="In the thread.", when="and here")
    )
    discord.user_message("chatter among humans", channel_id=GENERAL)
    discord.user_message("help me", channel_id=GENERAL, mention=True)
    await _until(discord, lambda: len(discord.bot_messages()) == 1, "the mention was not answered")
    discord.user_message("and here", channel_id=THREAD, mention=True)
    await _until(discord, lambda: len(discord.bot_messages()) == 2, "the thread was not answered")
    by_channel = {m["channel_id"]: m["content"] for m in discord.bot_messages()}
    assert by_channel == {GENERAL: "In the channel.", THREAD: "In the thread."}
    asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    assert asked == ["help me", "and here"], (
        "the chatter ran nothing; the mention is not part of the question"
    )
    assert f"<@{BOT_ID}>" not in json.dumps(fake_model.agent_requests)
    in_thread = json.dumps(fake_model.agent_requests[1]["messages"])
    assert "help me" not in in_thread, "the Discord thread is a conversation of its own"


async def test_a_message_in_a_thread_the_bot_never_heard_of_is_answered_in_it(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    thread = discord.new_thread()
    fake_model.script(Reply(text="Found it."))
    discord.user_message("over here", channel_id=thread, mention=True)
    await _until(discord, lambda: [m["channel_id"] for m in discord.bot_messages()] == [thread], "lost")
    assert [p["channel_id"] for m, p in discord.calls if m == "createMessage"] == [thread]


@pytest.mark.parametrize(
    "shared_bucket",
    [pytest.param(False, id="a-bucket-per-route"), pytest.param(True, id="posts-and-edits-share-one")],
)
async def test_a_long_answer_continues_in_messages_of_at_most_2000_characters(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
    shared_bucket: bool,
) -> None:
    discord.shared_bucket = shared_bucket  # Discord may count a channel's posts and edits together
    paragraphs = [f"Paragraph {n}: " + "words and more words " * 20 for n in range(24)]
    answer = "\n\n".join(paragraphs)
    assert len(answer) > 10_000, "more pieces than one bucket's calls"
    fake_model.script(Reply(text=answer))
    discord.user_message("tell me everything")
    await _until(
        discord,
        lambda: (
            "\n\n".join(m["content"] for m in discord.bot_messages()).replace("\n\n", "")
            == answer.replace("\n\n", "")
        ),
        "the long answer did not arrive whole",
    )
    pieces = [m["content"] for m in discord.bot_messages()]
    assert len(pieces) >= 3
    assert all(len(p) <= 2000 for p in pieces)
    assert all(p.startswith("Paragraph") for p in pieces), "cut at paragraph ends"
    assert discord.refused == [], "paced by the bucket Discord announced: never a 429"


async def test_a_429_is_waited_out_and_nothing_is_lost(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    fake_model.script(Reply(text="Worth the wait.", when="first"), Reply(text="Right away.", when="second"))
    discord.flood.arm("createMessage", 10, key=DM_CHANNEL)  # this DM's next post: 429 for 10 s
    discord.user_message("first")
    await discord.wait_for("createMessage:429")
    discord.user_message("a question in the guild", channel_id=GENERAL, mention=True)
    await _until(discord, lambda: any(m["channel_id"] == GENERAL for m in discord.bot_messages()), "guild")
    assert not discord.bot_messages(DM_CHANNEL), "the limited DM waits; the guild channel does not"
    await _until(
        discord,
        lambda: [m["content"] for m in discord.bot_messages(DM_CHANNEL)] == ["Worth the wait."],
        "lost",
    )
    refusals = [name for name, _ in discord.calls if name == "createMessage:429"]
    assert refusals == ["createMessage:429"], "no call for the DM before its retry_after was over"


async def test_the_bots_global_rate_limit_holds_every_chat_until_it_is_over(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    fake_model.script(Reply(text="One.", when="first"), Reply(text="Two.", when="second"))
    discord.flood.arm("createMessage", 2)  # the next post anywhere: 429, "global": true, for 2 s
    discord.user_message("first")
    await discord.wait_for("createMessage:429")
    discord.user_message("second", channel_id=GENERAL, mention=True)
    await _until(discord, lambda: len(discord.bot_messages()) == 2, "an answer was lost")
    assert {m["content"] for m in discord.bot_messages()} == {"One.", "Two."}
    refusals = [name for name, _ in discord.calls if name.endswith(":429")]
    assert refusals == ["createMessage:429"], "no chat called Discord before the global wait was over"


async def test_files_go_both_ways(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    fake_model.script(
        *file_in_file_out(
            "minutes.txt", "notes.md", "# Ship\n", "The meeting decided to ship; notes attached."
        )
    )
    discord.user_message("what was decided?", files={"minutes.txt": b"Decision: ship on Friday."})
    await _until(discord, lambda: any(m["files"] for m in discord.bot_messages()), "no file came back")
    first = unfenced(fake_model.agent_requests[0]["messages"][-1]["content"])
    assert first.startswith("what was decided?")
    assert "/mnt/user-data/uploads/minutes.txt" in first
    assert unfenced(fake_model.agent_requests[1]["messages"][-1]["content"]) == "Decision: ship on Friday."
    messages = discord.bot_messages()
    assert messages[0]["content"] == "The meeting decided to ship; notes attached."
    assert messages[-1]["files"] == {"notes.md": b"# Ship\n"}, "the file follows the answer"


async def test_a_slash_command_is_answered_and_a_skill_is_offered(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    names = [c["name"] for c in discord.commands]
    assert {"new", "goal", "status", "help"} <= set(names)
    fake_model.script(Reply(text="Hello again."))
    discord.user_message("hi")
    await _until(discord, lambda: len(discord.bot_messages()) == 1, "no answer")
    discord.slash_command("status")
    callbacks = await discord.wait_for("interactionCallback")
    assert callbacks[0]["type"] == 4, "answered at once (Discord wants it within 3 seconds)"
    assert callbacks[0]["data"]["content"] == "/status"
    await _until(discord, lambda: len(discord.bot_messages()) == 2, "the command's reply did not come")
    status = discord.bot_messages()[-1]["content"]
    assert "model" in status.lower(), status
    assert len(fake_model.agent_requests) == 1, "the router answered the command itself"


def test_skills_become_slash_commands_discord_accepts() -> None:
    catalog = SkillsCatalog.model_validate(
        {
            "generation": 1,
            "skills": [
                {
                    "name": "data-analysis",
                    "description": "Analyse data. More.",
                    "enabled": True,
                    "category": "public",
                },
                {"name": "Bad Name", "description": "no", "enabled": True, "category": "public"},
                {"name": "x" * 40, "description": "too long a name", "enabled": True, "category": "public"},
                {"name": "off", "description": "disabled", "enabled": False, "category": "public"},
            ],
        }
    )
    commands = discord_commands(catalog)
    names = [c["name"] for c in commands]
    assert names[:2] == ["new", "status"]
    assert "data-analysis" in names
    assert not {"Bad Name", "x" * 40, "off"} & set(names)
    assert all(1 <= len(c["description"]) <= 100 for c in commands)


async def test_a_gateway_payload_discord_py_cannot_read_is_dead_lettered_and_the_next_is_answered(
    bus: Bus,
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    broken = {"id": "12345", "channel_id": DM_CHANNEL, "content": "no author, no timestamp"}
    discord.dispatch("MESSAGE_CREATE", broken)
    fake_model.script(Reply(text="Still here."))
    discord.user_message("are you there?")
    await _until(discord, lambda: [m["content"] for m in discord.bot_messages()] == ["Still here."], "stuck")
    letters = await list_dead_letters(bus)
    assert len(letters) == 1
    assert json.loads(letters[0].data) == {"t": "MESSAGE_CREATE", "d": broken}
    assert "unreadable discord message: MESSAGE_CREATE: KeyError" in letters[0].reason
    assert discord.identified == 1, "the connection went on"


async def test_the_gateway_asking_to_reconnect_resumes_and_misses_nothing(
    discord: FakeDiscord,
    fake_model: FakeOpenAI,
    stack: AppConfig,
) -> None:
    fake_model.script(Reply(text="Caught up."))
    discord.ask_to_reconnect()
    discord.user_message("sent while reconnecting")
    await _until(discord, lambda: [m["content"] for m in discord.bot_messages()] == ["Caught up."], "missed")
    await discord.wait(lambda: discord.resumed == 1)
    assert discord.identified == 1, "resumed, not identified again"
