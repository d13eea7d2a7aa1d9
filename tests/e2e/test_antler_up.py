"""The whole system as a user starts it: `antler up` with a model, then `antler send` and the HTTP API.

One `antler up` for the module, started the way the installed `antler` command starts (`python -P`:
the working directory is not on its own sys.path) in a directory that holds what each test needs:
`$FAKE_KEY` in config.yaml, a toolbox of its own for the first `up` to build (while it serves), a
skills folder, folders named like Antler's packages, and a short grep timeout. The rest is the
defaults (the bwrap sandbox where the host has it, memory on). At the end Ctrl-C must stop it
cleanly and its server must have refused none of its components (the tripwire).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.conftest import finished
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.antler_up import UpStack, answer_to, antler_in, up_in

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("antler-up-e2e"),
    pytest.mark.timeout(300),
]
ENV = {"FAKE_KEY": "sk-test"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpStack]:
    workdir = tmp_path_factory.mktemp("up")
    async with FakeOpenAI(api_key="sk-test") as model:
        config = {
            "models": [
                {"name": "fake", "model": "fake-1", "api_key": "$FAKE_KEY", "base_url": model.base_url}
            ],
            "gateway": {"port": 0},
            "runner": {"processes": 2},  # the default on two cores
            "skills": {"path": "./skills"},
            # A toolbox of its own (no packages, so no package index): the first `up` builds it.
            "sandbox": {"grep_timeout_seconds": 5, "toolbox": {"path": "box", "python_packages": []}},
        }
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        skill = workdir / "skills" / "public" / "demo"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: demo\ndescription: A demo skill\n---\nDo it.\n", encoding="utf-8"
        )
        (workdir / "bus").mkdir()
        (workdir / "bus" / "__init__.py").write_text("raise ImportError('the user\\'s own bus package')\n")
        (workdir / "config").mkdir()  # a plain folder too
        async with up_in(workdir, ENV) as up:
            yield UpStack(up, model, await up.gateway_url())


@pytest.fixture(autouse=True)
def clean_script(stack: UpStack) -> Iterator[None]:
    """A failed test's unused replies must not answer the next test's requests."""
    yield
    stack.model._script.clear()


async def test_a_toolbox_the_first_up_must_build_is_built_while_the_rest_serves(stack: UpStack) -> None:
    assert "building it while Antler starts" in stack.up.log()
    async with httpx.AsyncClient(base_url=stack.gateway, timeout=10) as http:
        for _ in range(600):  # the sandbox is degraded (bare python3) until its toolbox is in
            body = (await http.get("/health")).json()
            if "sandbox" not in body["degraded"]:
                break
            assert "building the toolbox" in body["degraded"]["sandbox"], body
            await asyncio.sleep(0.2)
    assert "sandbox" not in body["degraded"], body
    assert (stack.up.workdir / "box" / "python" / "antler-toolbox.json").is_file(), "built"
    assert "sandbox toolbox: built" in stack.up.log()
    # The build's own output (pip's, minutes of it with packages) is in the log file, not on the console.
    building = "installing the sandbox toolbox into"
    assert building in "\n".join(stack.up._lines(stack.up.log_path))
    assert all(building not in line for line in stack.up.console())


async def test_up_then_send_then_the_api_sees_the_same_conversation(stack: UpStack) -> None:
    workdir = stack.up.workdir
    async with httpx.AsyncClient(base_url=f"{stack.gateway}/api", timeout=30) as http:
        threads_before = (await http.post("/threads/search", json={"limit": 10})).json()

        stack.model.script(Reply(text="Hello from Antler.", chunk_delay=0.02, when="UP-SEND"))
        code, out, err = await finished(
            await antler_in(workdir, "send", "UP-SEND hi there", "--chat", "me", env=ENV), 60
        )
        assert code == 0, err
        assert out.strip() == "Hello from Antler."

        threads = (await http.post("/threads/search", json={"limit": 10})).json()
        assert threads == threads_before, (
            "chat threads belong to the chat's user, not to the API's default user"
        )
        assert await answer_to(http, "ping") == "You said: ping"


async def test_a_catastrophic_grep_pattern_never_freezes_antler_up(stack: UpStack) -> None:
    model = stack.model
    workspace = "/mnt/user-data/workspace"
    # What a prompt injection can make the agent do: `(a+)+$` backtracks exponentially on "aaa…a!".
    model.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": f"{workspace}/grep-me.txt", "content": "a" * 34 + "!\n"})
            ],
            when="GREP-GO",
        ),
        Reply(tool_calls=[ToolCall("grep", {"pattern": "(a+)+$", "path": workspace})], when="grep-me.txt"),
        Reply(text="That search was too slow.", when="grep stopped"),
    )
    asked_before = len(model.agent_requests)
    async with httpx.AsyncClient(base_url=stack.gateway, timeout=10) as http:
        run = asyncio.create_task(
            http.post(
                "/api/runs/wait",
                json={
                    "assistant_id": "lead_agent",
                    "input": {"messages": [{"role": "user", "content": "GREP-GO"}]},
                },
                timeout=120,
            )
        )
        await model.wait_for_requests(asked_before + 2, timeout=60)  # the model has asked for the grep
        answered = 0
        while not run.done():  # all through the search, the gateway answers (a freeze times out)
            assert (await http.get("/health")).status_code == 200
            answered += 1
            await asyncio.sleep(0.2)
        reply = (await run).json()
    assert answered > 0
    tool_results = [
        r["messages"][-1] for r in model.agent_requests[asked_before:] if r["messages"][-1]["role"] == "tool"
    ]
    assert "grep stopped after 5s: the pattern took too long" in str(tool_results[-1]["content"])
    assert reply["messages"][-1]["content"] == "That search was too slow."


async def test_folders_named_like_antlers_packages_where_it_starts_do_not_shadow_them(stack: UpStack) -> None:
    """The stack started with `-P` in a directory holding `bus/` (which raises on import) and
    `config/`: had they shadowed Antler's packages, it would not have come up, nor answer."""
    async with httpx.AsyncClient(base_url=f"{stack.gateway}/api", timeout=60) as http:
        assert await answer_to(http, "shadow ping") == "You said: shadow ping"
