"""GitHub end to end: webhook deliveries signed as GitHub signs them, and the answer as a comment
through GitHub's REST API (a fake written from GitHub's documentation), through router and runner,
as `antler up` runs them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from channels.github import run as run_github
from channels.github.adapter import WRITING
from config import AppConfig
from tests.channels.conftest import writes_and_presents
from tests.fakes.github_server import FakeGitHub
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.support.adapters import adapter_stack
from tests.support.health import adapter, status_of
from tests.support.ports import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

ANSWER = "The widget breaks because the flange is loose. Tighten it and try again."


@pytest_asyncio.fixture
async def github() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as fake:
        yield fake


StackFor = Callable[..., contextlib.AbstractAsyncContextManager[AppConfig]]


@pytest.fixture
def stack_for(
    nats_url: str, github: FakeGitHub, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> StackFor:
    """Router, runner and the adapter against the fake, with `extra` settings (`app=True`: as the
    fake's GitHub App)."""

    def stack(**extra: Any) -> contextlib.AbstractAsyncContextManager[AppConfig]:
        settings = {**github.settings(free_port(), app=bool(extra.pop("app", False))), **extra}
        return adapter_stack(nats_url, config_data, app_config, "github", settings, run_github)

    return stack


@pytest_asyncio.fixture
async def stack(github: FakeGitHub, stack_for: StackFor) -> AsyncIterator[AppConfig]:
    async with stack_for() as config:
        await github.wait_for("user")
        yield config


def asked(fake_model: FakeOpenAI) -> list[str]:
    """What the agent was asked, without the line naming the issue (`question`'s header)."""
    texts = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    return [text.split("\n\n", 1)[1] if text.startswith("(GitHub ") else text for text in texts]


async def test_a_mention_in_an_issue_comment_is_answered_in_a_comment_edited_as_it_streams(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text=ANSWER, chunk_delay=0.25))
    answer = await github.deliver("issue_comment", github.issue_comment("@antler-bot why does it break?"))
    assert answer.status_code == 200, answer.text
    await github.wait(lambda: github.bodies() == [ANSWER], timeout=60)
    comment = github.answers()[0]
    assert (comment["number"], comment["repo"]) == (1, "acme/widgets")
    assert comment["user"]["login"] == "antler-bot"
    assert comment["edits"], "the comment was posted early and edited as the answer streamed"
    assert all(shown.endswith(WRITING) for shown in comment["edits"]), "marked as still being written"
    assert all(ANSWER.startswith(shown.removesuffix(WRITING)) for shown in comment["edits"])
    assert asked(fake_model) == ["why does it break?"], "the mention is taken out of the question"
    told = unfenced(fake_model.agent_requests[0]["messages"][-1]["content"])
    assert told.startswith("(GitHub issue acme/widgets#1: Issue 1)\n\n"), "the agent knows where it is"


async def test_a_form_encoded_delivery_is_read_like_a_json_one(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    payload = github.issue_comment("@antler-bot sent as a form")
    answer = await github.deliver("issue_comment", payload, form=True)
    assert answer.status_code == 200, answer.text
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    assert asked(fake_model) == ["sent as a form"]


async def test_our_chat_commands_work_after_the_mention(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    await github.deliver("issue_comment", github.issue_comment("@antler-bot /help"))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    assert "/new" in github.bodies()[0], "the router's command list, as a comment"
    assert fake_model.agent_requests == [], "a command, not a question for the agent"


async def test_the_same_issue_is_one_conversation_and_a_new_issue_another(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="First answer."), Reply(text="Second answer."), Reply(text="Third."))
    await github.deliver("issue_comment", github.issue_comment("@antler-bot remember 42"))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    await github.deliver("issue_comment", github.issue_comment("@Antler-Bot what did I say?"))
    await github.wait(lambda: len(github.bodies()) == 2, timeout=60)
    await github.deliver("issue_comment", github.issue_comment("@antler-bot hello", number=2))
    await github.wait(lambda: len(github.bodies()) == 3, timeout=60)
    second, third = fake_model.agent_requests[1], fake_model.agent_requests[2]
    assert any("remember 42" in json.dumps(m) for m in second["messages"]), "the issue's thread goes on"
    assert not any("remember 42" in json.dumps(m) for m in third["messages"]), "another issue, another thread"
    assert [c["number"] for c in github.answers()] == [1, 1, 2]


async def test_a_delivery_with_a_bad_or_missing_signature_is_refused_with_401(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    payload = github.issue_comment("@antler-bot forged question")
    body = json.dumps(payload).encode()
    forged = await github.deliver("issue_comment", body, signature=github.sign(body, "not-the-secret"))
    assert forged.status_code == 401
    assert "X-Hub-Signature-256" in forged.json()["error"]
    unsigned = await github.deliver("issue_comment", body, signature="")
    assert unsigned.status_code == 401
    assert "missing X-Hub-Signature-256" in unsigned.json()["error"]
    tampered = await github.deliver("issue_comment", body + b" ", signature=github.sign(body))
    assert tampered.status_code == 401
    await github.deliver("issue_comment", github.issue_comment("@antler-bot genuine question"))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    assert asked(fake_model) == ["genuine question"], "nothing refused reached the agent"
    assert await list_dead_letters(bus) == []


async def test_a_redelivered_webhook_is_answered_once(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    payload = github.issue_comment("@antler-bot answer me once")
    first = await github.deliver("issue_comment", payload, delivery="d6a1c4e0-0001")
    again = await github.deliver("issue_comment", payload, delivery="d6a1c4e0-0001")  # "Redeliver"
    assert (first.status_code, again.status_code) == (200, 200)
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    await github.deliver("issue_comment", github.issue_comment("@antler-bot and this"))
    await github.wait(lambda: len(github.bodies()) == 2, timeout=60)
    assert asked(fake_model) == ["answer me once", "and this"], "the redelivery ran nothing"


async def test_what_asks_the_bot_nothing_is_acknowledged_and_ignored(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    ping = await github.deliver("ping", {"zen": "Keep it logically awesome.", "hook_id": 1})
    assert ping.status_code == 200
    ignored = [
        await github.deliver("issue_comment", github.issue_comment("no mention here")),
        await github.deliver("issue_comment", github.issue_comment("@antler-bot-dev is someone else")),
        await github.deliver(
            "issue_comment", github.issue_comment("@antler-bot I am me", author="antler-bot")
        ),
        await github.deliver(
            "issue_comment", github.issue_comment("@antler-bot hi", author="ci[bot]", bot=True)
        ),
        await github.deliver("issue_comment", {**github.issue_comment("@antler-bot x"), "action": "edited"}),
        await github.deliver("star", {"action": "created", **github._envelope("alice")}),
    ]
    assert [r.status_code for r in ignored] == [202] * 6
    assert "not mentioned" in ignored[0].json()["ignored"]
    await github.deliver("issue_comment", github.issue_comment("@antler-bot now you"))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    assert asked(fake_model) == ["now you"]


async def test_a_new_issue_mentioning_the_bot_is_answered_with_its_title_and_body(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Looking into it."))
    payload = github.issue_opened("Crash on start", "@antler-bot the app crashes at launch", number=9)
    assert (await github.deliver("issues", payload)).status_code == 200
    await github.wait(lambda: github.bodies() == ["Looking into it."], timeout=60)
    assert github.answers()[0]["number"] == 9
    assert asked(fake_model) == ["Crash on start\n\nthe app crashes at launch"]


async def test_a_diff_comment_is_answered_in_its_review_thread(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="That line leaks a handle."))
    payload = github.review_comment("@antler-bot is this line safe?", number=5)
    assert (await github.deliver("pull_request_review_comment", payload)).status_code == 200
    await github.wait(lambda: github.bodies() == ["That line leaks a handle."], timeout=60)
    reply = (await github.wait_for("reply"))[0]
    assert reply["number"] == 5
    assert reply["in_reply_to"] == payload["comment"]["id"]
    assert github.answers()[0]["in_reply_to_id"] == payload["comment"]["id"]
    told = unfenced(fake_model.agent_requests[0]["messages"][-1]["content"])
    assert told.startswith(
        "(GitHub pull request acme/widgets#5: PR 5)\n\nOn src/widget.py line 12:\n```diff\n@@"
    )
    assert told.endswith("```\n\nis this line safe?")


async def test_a_signed_payload_that_cannot_be_read_is_refused_naming_the_field_and_dead_lettered(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    broken = github.issue_comment("@antler-bot hi")
    del broken["issue"]["number"]
    answer = await github.deliver("issue_comment", broken, delivery="bad-0001")
    assert answer.status_code == 400
    assert "issue.number" in answer.json()["error"]
    letters = await list_dead_letters(bus)
    assert len(letters) == 1
    assert json.loads(letters[0].data) == broken
    assert "unreadable github message: issue_comment: field issue.number" in letters[0].reason
    not_json = await github.deliver("issue_comment", b"{not json", delivery="bad-0002")
    assert not_json.status_code == 400
    await github.deliver("issue_comment", github.issue_comment("@antler-bot still there?"))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)


async def test_a_secondary_rate_limit_is_waited_out_and_the_answer_still_arrives_once(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Worth the wait."))
    github.flood.arm("comments", 2)
    await github.deliver("issue_comment", github.issue_comment("@antler-bot be patient"))
    await github.wait(lambda: github.bodies() == ["Worth the wait."], timeout=60)
    assert (403, "create") in github.refusals
    assert len(github.answers()) == 1


async def test_a_file_the_agent_presents_is_linked_under_the_answer(
    github: FakeGitHub, fake_model: FakeOpenAI, stack_for: StackFor
) -> None:
    fake_model.script(*writes_and_presents("/mnt/user-data/outputs/plan.md", "# Plan\n", "Here is the plan."))
    extra = {"files_base_url": "https://antler.example.com/"}
    async with stack_for(**extra):
        await github.deliver("issue_comment", github.issue_comment("@antler-bot plan it"))
        await github.wait(lambda: any("plan.md" in body for body in github.bodies()), timeout=60)
    body = github.bodies()[0]
    assert body.startswith("Here is the plan.\n\n")
    assert "[plan.md](https://antler.example.com/api/threads/" in body
    assert body.endswith("/artifacts/mnt/user-data/outputs/plan.md)")


async def test_files_attached_to_a_comment_become_uploads_and_other_links_are_not_fetched(
    github: FakeGitHub, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    screenshot = github.attach("image.png", b"\x89PNG a screenshot", "image/png")
    notes = github.attach("notes.txt", b"buy milk", "text/plain")
    body = (
        f"@antler-bot what do these say?\n\n![crash screen]({screenshot})\n[notes.txt]({notes})\n"
        f"see also {github.base_url}/elsewhere"
    )
    await github.deliver("issue_comment", github.issue_comment(body))
    await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    told = str(fake_model.agent_requests[0]["messages"][-1]["content"])
    assert "/mnt/user-data/uploads/notes.txt" in told
    assert "/mnt/user-data/uploads/crash screen.png" in told
    assert [name for name, _ in github.calls].count("attachment") == 2
    assert "elsewhere" not in [name for name, _ in github.calls], "only attachments are fetched"


async def test_as_a_github_app_the_answer_is_posted_with_the_installations_token(
    github: FakeGitHub, fake_model: FakeOpenAI, stack_for: StackFor
) -> None:
    fake_model.script(Reply(text="Posted as the App."))
    async with stack_for(app=True):
        await github.wait_for("app")
        await github.deliver("issue_comment", github.issue_comment("@antler-app hello app"))
        await github.wait(lambda: github.bodies() == ["Posted as the App."], timeout=60)
    assert github.answers()[0]["user"]["login"] == "antler-app[bot]"
    assert (await github.wait_for("access_tokens"))[0]["installation"] == github.installation_id


async def test_only_the_listed_repositories_are_answered(
    github: FakeGitHub, fake_model: FakeOpenAI, stack_for: StackFor
) -> None:
    async with stack_for(repositories=["Acme/Gadgets"]):
        await github.wait_for("user")
        other = await github.deliver("issue_comment", github.issue_comment("@antler-bot hi"))
        assert other.status_code == 202
        assert "not in channels.github.repositories" in other.json()["ignored"]
        github.repo = "acme/gadgets"
        await github.deliver("issue_comment", github.issue_comment("@antler-bot hi gadgets"))
        await github.wait(lambda: len(github.bodies()) == 1, timeout=60)
    assert asked(fake_model) == ["hi gadgets"]


async def test_github_out_of_reach_at_start_is_unhealthy_until_it_is_there(
    nats_url: str, bus: Bus, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> None:
    github = FakeGitHub()
    github.port = free_port()
    settings = github.settings(free_port())
    async with adapter(nats_url, bus, config_data, app_config, "github", settings, run_github) as watch:
        seen = await watch.until(status_of("github", "unhealthy"))
        assert f"cannot reach 127.0.0.1:{github.port}" in seen["github"].text, seen
        async with github:
            await watch.until(status_of("github", "healthy"), timeout=90)


async def test_a_token_github_refuses_is_reported_as_configuration_to_fix_without_quoting_it(
    nats_url: str, bus: Bus, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> None:
    async with FakeGitHub() as github:
        settings = {**github.settings(free_port()), "token": "ghp_WRONG"}
        async with adapter(nats_url, bus, config_data, app_config, "github", settings, run_github) as watch:
            seen = await watch.until(status_of("github", "unhealthy"))
    text = seen["github"].text
    assert text.startswith("GitHub refused the adapter's credentials (401: Bad credentials)"), text
    assert "WRONG" not in text


async def test_a_comment_waiting_to_be_edited_holds_no_other_issues_answer(
    github: FakeGitHub, fake_model: FakeOpenAI, stack_for: StackFor
) -> None:
    slow = "one two three four five six seven eight nine ten"
    fake_model.script(
        Reply(text=slow, when="first issue", chunk_delay=0.3),
        Reply(text="Second answered.", when="second issue"),
    )
    async with stack_for(edit_interval_seconds=60):
        await github.wait_for("user")
        await github.deliver("issue_comment", github.issue_comment("@antler-bot first issue", number=1))
        await github.wait(lambda: any(c["number"] == 1 for c in github.answers()), timeout=60)
        await github.deliver("issue_comment", github.issue_comment("@antler-bot second issue", number=2))
        await github.wait(lambda: any(c["number"] == 2 for c in github.answers()), timeout=60)
        first = next(c for c in github.answers() if c["number"] == 1)
        assert first["edits"] == [], "issue 1's comment waits out its edit interval meanwhile"
        assert first["body"] != slow
    assert github.refusals == [], "the pacing is the adapter's: GitHub never had to refuse"
