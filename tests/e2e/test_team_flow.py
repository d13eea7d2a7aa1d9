"""A team runs it: the whole flow of issue 52 on `antler up` defaults with a real OpenID provider.

One `antler up` (bwrap sandbox, one NATS user per component, two runner processes) with single
sign-on at a real OpenID provider (panva's oidc-provider under node), roles, a daily budget, and the
Telegram and Slack adapters against their fake platforms. Alice (group `eng`, role `engineer`: the
small model only, no shell, a daily budget) and Bob (no group: `member`) walk it:

1. both sign in by SSO and get the role their group maps to;
2. Alice cannot use the big model nor the shell: from the web UI's HTTP API, the LangGraph SDK,
   Telegram (her Telegram user linked with `/connect`) and a bus script;
3. she links her Slack user with `/connect`: that chat's thread is hers in the web UI, and the chat
   goes on in it with her memory;
   she schedules a task and deletes it;
4. she uses her daily budget up and is told so, while Bob goes on;
5. every step is in `antler audit` (the real CLI).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from langgraph_sdk import get_client

from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from sandbox.providers import bwrap_works
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.slack_server import FakeSlack
from tests.fakes.telegram_server import FakeTelegram
from tests.support.antler_up import AntlerUp
from tests.support.eventually import eventually
from tests.support.oidc_idp import (
    ALICE,
    CLIENT_SECRET,
    IdP,
    antler_client,
    provider_config,
    running_idp,
    sign_in,
)
from tests.support.ports import free_port
from tests.support.schedules import said

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("team-flow")]

PEOPLE = {
    "alice": ALICE,
    "bob": {"password": "bob-pw", "email": "bob@example.com", "email_verified": True, "groups": []},
}
DAILY_TOKENS = 20_000  # alice's: room for the steps before the budget step (~9k), used up within it
TG_CHAT = 42
SLACK_DM = "D1"


@dataclass
class Team:
    workdir: Path
    up: AntlerUp
    model: FakeOpenAI
    telegram: FakeTelegram
    slack: FakeSlack
    idp: IdP
    gateway: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Team]:
    if not bwrap_works():
        pytest.fail(
            "the team flow runs on defaults, whose sandbox is bwrap: install bubblewrap", pytrace=False
        )
    workdir = tmp_path_factory.mktemp("team")
    port = free_port()  # the provider must know the callback before Antler starts
    async with (
        running_idp([antler_client(port)], PEOPLE) as idp,
        FakeOpenAI(api_key="sk-test") as model,
        FakeOpenAI(api_key="sk-test") as memory_model,
        FakeTelegram() as telegram,
        FakeSlack() as slack,
    ):
        fake = {"api_key": "sk-test", "base_url": model.base_url, "max_retries": 0}
        config = {
            "models": [
                {"name": "fake", "model": "fake-1", **fake},
                {"name": "big", "model": "big-1", **fake},
                # The memory updater's own model, so its requests never take the agent's script.
                {"name": "memo", "model": "memo-1", **fake, "base_url": memory_model.base_url},
            ],
            "gateway": {
                "port": port,
                "auth": {"oidc": [provider_config(idp.issuer, {"eng": "engineer"})]},
            },
            "access": {
                "roles": {
                    "member": {},
                    "engineer": {
                        "models": ["fake"],
                        "tools": ["*", "!bash"],
                        "budget": {"tokens_per_day": DAILY_TOKENS},
                    },
                },
            },
            "runner": {"processes": 2},  # the default on two cores, said outright
            "memory": {"model_name": "memo"},
            "channels": {
                "telegram": {"enabled": True, "bot_token": telegram.token, "base_url": telegram.base_url},
                "slack": {
                    "enabled": True,
                    "bot_token": "xoxb-test",
                    "app_token": "xapp-test",
                    "base_url": slack.base_url,
                },
            },
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        up = AntlerUp(workdir)
        try:
            await up.start(runners=2)
            yield Team(workdir, up, model, telegram, slack, idp, await up.gateway_url())
            code = await up.stop(90)
            assert code == 0, f"antler up did not stop cleanly on SIGINT ({code}):\n{up.tail()}"
        finally:
            await up.kill_all()
        refused = up.violations()
        assert not refused, "nats-server refused components on defaults:\n  " + "\n  ".join(refused)


# -- helpers ------------------------------------------------------------------------------------------


@dataclass
class Person:
    """A signed-in person's browser: session and CSRF cookies, as the web UI holds them."""

    http: httpx.AsyncClient
    user_id: str

    @property
    def session_headers(self) -> dict[str, str]:
        cookies = "; ".join(
            f"{c.name}={c.value}" for c in self.http.cookies.jar if c.name in ("access_token", "csrf_token")
        )
        return {"Cookie": cookies, "X-CSRF-Token": self.http.headers["X-CSRF-Token"]}


async def signed_in(team: Team, login: str) -> Person:
    http = httpx.AsyncClient(timeout=120)
    landed = await sign_in(http, team.gateway, "corp", login, str(PEOPLE[login]["password"]))
    assert str(landed.url) == f"{team.gateway}/", landed.text
    http.headers["X-CSRF-Token"] = http.cookies["csrf_token"]
    me = (await http.get(f"{team.gateway}/api/v1/auth/me")).json()
    return Person(http, me["id"])


def run_body(text: str, **configurable: Any) -> dict[str, Any]:
    return {
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": text}]},
        "config": {"configurable": configurable},
    }


def request_for(model: FakeOpenAI, marker: str) -> dict[str, Any]:
    """The latest agent request whose first user message holds `marker`."""
    for request in reversed(model.agent_requests):
        users = [m for m in request["messages"] if m["role"] == "user"]
        if users and marker in str(users[-1]["content"]):
            return request
    raise AssertionError(f"no model request for {marker!r}")


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def shell_attempt(marker: str) -> tuple[Reply, Reply]:
    """The model calls `bash` anyway (a tool it was not offered), then answers what it got back."""
    return (
        Reply(tool_calls=[ToolCall("bash", {"command": "id"})], when=marker),
        Reply(text=f"{marker} DONE", when="not available in this run"),
    )


async def connect_code(said_connect: Callable[[], str | None]) -> str:
    reply = await eventually(said_connect, "a /connect code")
    code = re.search(r"code: ([A-Z0-9]{4}-[A-Z0-9]{4})", reply)
    assert code, reply
    return code.group(1)


def telegram_text(team: Team, contains: str) -> str | None:
    for method, params in reversed(team.telegram.calls):
        if method in ("sendMessage", "editMessageText") and contains in str(params.get("text", "")):
            return str(params["text"])
    return None


def slack_text(team: Team, contains: str) -> str | None:
    for method, params in reversed(team.slack.calls):
        if method in ("chat.postMessage", "chat.update") and contains in str(params.get("text", "")):
            return str(params["text"])
    return None


def slack_dm(text: str, n: int) -> dict[str, Any]:
    ts = f"1700000{n:03d}.000100"
    return {
        "type": "message",
        "channel": SLACK_DM,
        "channel_type": "im",
        "user": "U1",
        "text": text,
        "ts": ts,
    }


# -- the steps -----------------------------------------------------------------------------------------


async def step_1_both_sign_in_by_sso_and_get_their_groups_roles(team: Team) -> tuple[Person, Person]:
    alice, bob = await signed_in(team, "alice"), await signed_in(team, "bob")
    profile = (await alice.http.get(f"{team.gateway}/api/user-profile")).json()
    assert (profile["role"], profile["models"]) == ("engineer", ["fake"])
    assert (await bob.http.get(f"{team.gateway}/api/user-profile")).json()["role"] == "member"
    pickable = (await alice.http.get(f"{team.gateway}/api/models")).json()["models"]
    assert [m["name"] for m in pickable] == ["fake"], "the web UI's picker offers her role's models only"
    assert len((await bob.http.get(f"{team.gateway}/api/models")).json()["models"]) == 3
    return alice, bob


async def step_2a_web_api_refuses_the_big_model_and_offers_no_shell(team: Team, alice: Person) -> None:
    api = f"{team.gateway}/api"
    thread = (await alice.http.post(f"{api}/threads", json={})).json()["thread_id"]
    refused = await alice.http.post(
        f"{api}/threads/{thread}/runs/wait", json=run_body("hi", model_name="big")
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"].startswith("model:")
    assert "may not use model 'big'" in refused.json()["detail"]

    team.model.script(*shell_attempt("TEAM-WEB"))
    answer = await alice.http.post(f"{api}/threads/{thread}/runs/wait", json=run_body("TEAM-WEB run id"))
    assert answer.status_code == 200, answer.text
    messages = answer.json()["messages"]
    assert messages[-1]["content"] == "TEAM-WEB DONE"
    assert "not available" in next(m["content"] for m in messages if m["type"] == "tool")
    assert "bash" not in offered(request_for(team.model, "TEAM-WEB"))
    assert "read_file" in offered(request_for(team.model, "TEAM-WEB"))


async def step_2b_the_sdk_is_refused_the_big_model_and_offered_no_shell(team: Team, alice: Person) -> None:
    sdk = get_client(url=f"{team.gateway}/api", headers=alice.session_headers, timeout=120)
    try:
        thread = (await sdk.threads.create())["thread_id"]
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await sdk.runs.wait(thread, "lead_agent", input={"messages": [{"role": "user", "content": "hi"}]},
                                config={"configurable": {"model_name": "big"}})  # fmt: skip
        assert refused.value.response.status_code == 403
        team.model.script(Reply(text="SDK-OK", when="TEAM-SDK"))
        values = await sdk.runs.wait(
            thread, "lead_agent", input={"messages": [{"role": "user", "content": "TEAM-SDK"}]}
        )
        assert isinstance(values, dict)
        assert values["messages"][-1]["content"] == "SDK-OK"
    finally:
        await sdk.http.client.aclose()
    assert "bash" not in offered(request_for(team.model, "TEAM-SDK"))


async def step_2c_telegram_linked_to_alice_has_her_role(team: Team, alice: Person) -> None:
    await team.telegram.wait_for("getMe", timeout=60)
    team.telegram.send_user_message("/connect", chat_id=TG_CHAT)
    code = await connect_code(lambda: telegram_text(team, "code:"))
    linked = await alice.http.post(f"{team.gateway}/api/v1/connect", json={"code": code})
    assert linked.status_code == 200, linked.text
    assert linked.json()["chat_user"] == "telegram:7"

    team.telegram.send_user_message("/models big", chat_id=TG_CHAT)
    refusal = await eventually(lambda: telegram_text(team, "may not use model"), "refusal")
    assert "Your role 'engineer' may not use model 'big'" in refusal

    team.model.script(*shell_attempt("TEAM-TG"))
    team.telegram.send_user_message("TEAM-TG who am I", chat_id=TG_CHAT)
    await eventually(lambda: said(team.telegram, TG_CHAT, "TEAM-TG DONE"), "the Telegram answer")
    assert "bash" not in offered(request_for(team.model, "TEAM-TG"))


async def step_2d_a_bus_script_running_as_alice_is_refused_the_big_model_and_the_shell(
    team: Team, alice: Person
) -> None:
    from bus.launcher import login
    from config import AppConfig, BusConfig

    as_admin = login(AppConfig(bus=BusConfig(data_dir=str(team.up.data_dir))))  # the saved credentials
    bus: Bus = await as_admin.connect(await team.up.nats_url(), "team-script", provision=False)

    async def run_as_alice(text: str, **configurable: Any) -> list[Any]:
        request = RunRequest(
            thread_id=f"team-script-{text}",
            user_id=alice.user_id,
            input={"messages": [{"role": "user", "content": text}]},
            config={"configurable": configurable},
        )
        await submit_run(bus, request)
        return await collect_run(bus, request.run_id, timeout=90)

    try:
        events = await run_as_alice("TEAM-SCRIPT-BIG", model_name="big")
        team.model.script(*shell_attempt("TEAM-SCRIPT-SHELL"))
        shell = await run_as_alice("TEAM-SCRIPT-SHELL")
    finally:
        await bus.close()
    assert shell[-1].data["status"] == "success"
    answered = request_for(team.model, "TEAM-SCRIPT-SHELL")["messages"][-1]  # what the tool call got back
    assert "Error: the tool bash is not available in this run" in answered["content"]
    assert "bash" not in offered(request_for(team.model, "TEAM-SCRIPT-SHELL"))
    error = next(e.data for e in events if e.event == "error")
    assert "may not use model 'big'" in error["message"]
    assert not [r for r in team.model.agent_requests if r["model"] == "big-1"], (
        "the big model was never called"
    )


async def step_3_slack_linked_its_thread_is_alices_with_her_memory(team: Team, alice: Person) -> str:
    api = f"{team.gateway}/api"
    fact = await alice.http.post(f"{api}/memory/facts", json={"content": "Alice's team codename is HERON"})
    assert fact.is_success, fact.text
    await eventually(lambda: team.slack.connected.is_set(), "Slack connected")
    team.model.script(Reply(text="SLACK-HELLO", when="TEAM-SLACK-1"))
    team.slack.send_event(slack_dm("TEAM-SLACK-1 hello from Slack", 1))
    await eventually(lambda: slack_text(team, "SLACK-HELLO"), "the Slack answer")
    assert "HERON" not in json.dumps(request_for(team.model, "TEAM-SLACK-1")), "not alice yet"

    team.slack.send_event(slack_dm("/connect", 2))
    code = await connect_code(lambda: slack_text(team, "code:"))
    linked = (await alice.http.post(f"{api}/v1/connect", json={"code": code})).json()
    assert linked["chat_user"] == "slack:U1"
    [thread] = linked["threads"]
    mine = (await alice.http.post(f"{api}/threads/search", json={"limit": 100})).json()
    assert thread in [t["thread_id"] for t in mine], "the Slack thread is in alice's web UI"
    state = (await alice.http.get(f"{api}/threads/{thread}/state")).json()
    assert [m["content"] for m in state["values"]["messages"]][:2] == [
        "TEAM-SLACK-1 hello from Slack",
        "SLACK-HELLO",
    ]

    team.model.script(Reply(text="SLACK-AS-ALICE", when="TEAM-SLACK-2"))
    team.slack.send_event(slack_dm("TEAM-SLACK-2 what is our codename?", 3))
    await eventually(lambda: slack_text(team, "SLACK-AS-ALICE"), "the linked Slack answer")
    asked = request_for(team.model, "TEAM-SLACK-2")
    assert "HERON" in json.dumps(asked), "the chat runs with alice's memory"
    assert "TEAM-SLACK-1 hello from Slack" in json.dumps(asked), "in the same thread"
    state = (await alice.http.get(f"{api}/threads/{thread}/state")).json()
    assert state["values"]["messages"][-1]["content"] == "SLACK-AS-ALICE"
    return thread


async def step_3b_alice_schedules_a_task_and_deletes_it(team: Team, alice: Person) -> str:
    api = f"{team.gateway}/api"
    task = {
        "title": "Team digest",
        "prompt": "summarize what the team did",
        "schedule_type": "cron",
        "schedule_spec": {"cron": "0 8 * * 1-5"},
        "timezone": "UTC",
    }
    created = await alice.http.post(f"{api}/scheduled-tasks", json=task)
    assert created.status_code == 200, created.text
    task_id = str(created.json()["id"])
    assert (await alice.http.delete(f"{api}/scheduled-tasks/{task_id}")).is_success
    return task_id


async def step_4_alice_uses_her_daily_budget_up_and_bob_goes_on(
    team: Team, alice: Person, bob: Person
) -> None:
    api = f"{team.gateway}/api"
    thread = (await alice.http.post(f"{api}/threads", json={})).json()["thread_id"]
    told = None
    for n in range(30):  # each call costs the system prompt and more: a few thousand tokens
        team.model.script(Reply(text=f"BUDGET-{n} ok", when=f"TEAM-BUDGET-{n}"))
        answer = await alice.http.post(f"{api}/threads/{thread}/runs/wait", json=run_body(f"TEAM-BUDGET-{n}"))
        text = answer.json()["messages"][-1]["content"]
        if "daily budget" in text:
            told = text
            break
    assert told is not None, "alice never reached her daily budget"
    assert f"daily budget of {DAILY_TOKENS} tokens" in told
    assert "resets at" in told
    usage = (await alice.http.get(f"{api}/usage")).json()["people"][0]
    assert usage["periods"][0]["tokens"] >= DAILY_TOKENS

    bob_thread = (await bob.http.post(f"{api}/threads", json={})).json()["thread_id"]
    team.model.script(Reply(text="BOB-OK", when="TEAM-BOB"))
    answer = await bob.http.post(f"{api}/threads/{bob_thread}/runs/wait", json=run_body("TEAM-BOB"))
    assert answer.json()["messages"][-1]["content"] == "BOB-OK"


async def step_5_every_step_is_in_antler_audit(team: Team, alice: Person, bob: Person, task_id: str) -> None:
    config = str(team.workdir / "config.yaml")

    async def audit(*args: str) -> list[dict[str, Any]]:
        code, out, err = await finished(await run_antler("audit", "-c", config, "--json", *args), 90)
        assert code == 0, err
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    alices = await audit("--user", alice.user_id, "--limit", "1000")
    actions = [r["action"] for r in alices]
    for action in ("account_created", "sign_in", "run_refused", "run_started", "tool_refused",
                   "chat_linked", "budget_refused"):  # fmt: skip
        assert action in actions, f"{action} missing from alice's audit trail: {actions}"
    refused_models = [r for r in alices if r["action"] == "run_refused"]
    assert len(refused_models) >= 2  # the web API's and the SDK's at the gateway, the script's at the runner
    assert {r["detail"]["chat_user"] for r in alices if r["action"] == "chat_linked"} == {
        "telegram:7",
        "slack:U1",
    }
    assert {r["detail"]["tool"] for r in alices if r["action"] == "tool_refused"} == {"bash"}
    assert all(r["detail"]["role"] == "engineer" for r in alices if r["action"] == "run_started")
    scheduled = [r["detail"] for r in alices if r["action"] == "schedule_changed"]
    assert [(d["change"], d["task_id"]) for d in scheduled] == [("created", task_id), ("deleted", task_id)]
    sign_ins = await audit("--action", "sign_in")
    assert {r["user_id"] for r in sign_ins} >= {alice.user_id, bob.user_id}
    assert "alice-pw" not in json.dumps(alices)
    assert CLIENT_SECRET not in json.dumps(alices)


async def test_a_team_member_from_sso_sign_in_to_the_audit_trail(team: Team) -> None:
    alice, bob = await step_1_both_sign_in_by_sso_and_get_their_groups_roles(team)
    try:
        await step_2a_web_api_refuses_the_big_model_and_offers_no_shell(team, alice)
        await step_2b_the_sdk_is_refused_the_big_model_and_offered_no_shell(team, alice)
        await step_2c_telegram_linked_to_alice_has_her_role(team, alice)
        await step_2d_a_bus_script_running_as_alice_is_refused_the_big_model_and_the_shell(team, alice)
        await step_3_slack_linked_its_thread_is_alices_with_her_memory(team, alice)
        task_id = await step_3b_alice_schedules_a_task_and_deletes_it(team, alice)
        await step_4_alice_uses_her_daily_budget_up_and_bob_goes_on(team, alice, bob)
        await step_5_every_step_is_in_antler_audit(team, alice, bob, task_id)
    finally:
        await alice.http.aclose()
        await bob.http.aclose()
