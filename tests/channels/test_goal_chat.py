"""`/goal` in a chat (Telegram, the real python-telegram-bot against the fake Bot API): it sets the goal,
the runner goes on by itself, the chat sees a short status per step and the final answer once."""

from __future__ import annotations

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.fakes.telegram_server import FakeTelegram


def shown(bot: FakeTelegram) -> dict[int, str]:
    """What each message the bot posted in the chat says now (after its edits), in posting order."""
    texts: dict[int, str] = {}
    for method, params in bot.calls:
        if method == "sendMessage":
            texts[int(params["sent_message_id"])] = str(params["text"])
        elif method == "editMessageText":
            texts[int(params["message_id"])] = str(params["text"])
    return texts


def showing(bot: FakeTelegram, text: str) -> bool:
    return any(text in shown_text for shown_text in shown(bot).values())


async def test_goal_in_a_chat_sets_it_the_runner_goes_on_and_the_chat_gets_one_final_answer(
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    telegram_stack: AppConfig,
) -> None:
    fake_model.script(
        Reply(text="An old silent pond, a frog jumps in."),
        Reply(text="Title: The Pond. Done.", when="Next step: give it a title"),
    )
    fake_model.verdicts(
        {"verdict": "continue", "reason": "it has no title", "next_step": "give it a title"},
        {"verdict": "done", "reason": "a titled haiku"},
    )
    telegram.send_user_message("/goal Write a haiku with a title")
    await telegram.wait(lambda: showing(telegram, "(goal reached)"))

    # The objective went to the agent as the chat's message; the continuation asked for the next step.
    asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    assert asked[0] == "Write a haiku with a title"
    assert "Next step: give it a title" in asked[1]
    # Asking for the goal now: it was reached, so it is cleared (and the answer came before this reply).
    telegram.send_user_message("/goal")
    await telegram.wait(lambda: showing(telegram, "No active goal"))

    messages = list(shown(telegram).values())
    assert messages[0] == "goal: continuing (1/8) — next: give it a title"
    finals = [text for text in messages if "Title: The Pond" in text]
    assert finals == ["Title: The Pond. Done.\n\n(goal reached)"], "the final answer, once"
    assert len(fake_model.verdict_requests) == 2


async def test_goal_shows_and_clears_in_a_chat(
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    telegram_stack: AppConfig,
) -> None:
    fake_model.script(Reply(text="Which city are you moving to?"))
    fake_model.verdicts({"verdict": "blocked", "question": "Which city, and by when?"})
    telegram.send_user_message("/goal Plan my move")
    await telegram.wait(lambda: showing(telegram, "Which city, and by when?"))
    telegram.send_user_message("/goal")
    await telegram.wait(lambda: showing(telegram, "Goal: Plan my move"))
    status = next(text for text in shown(telegram).values() if text.startswith("Goal: "))
    assert "Last verdict: blocked" in status
    telegram.send_user_message("/goal clear")
    await telegram.wait(lambda: showing(telegram, "Goal cleared."))
    telegram.send_user_message("/goal")
    await telegram.wait(lambda: showing(telegram, "No active goal"))
    assert len(fake_model.agent_requests) == 1, "blocked: nothing went on by itself"
