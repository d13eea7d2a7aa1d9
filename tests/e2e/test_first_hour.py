"""A newcomer's first hour, as the README walks it: `antler up` with no model says so last and
plainly; its console is the README's few lines; the README's first-turn config block, as written
(pointed at the scripted model), answers `antler send`, which shows the agent's steps on stderr and
exits with a clear message when Antler stops under it.

Two `antler up`s: one with no model (a config.yaml holding only a free gateway port), one from the
README's block. The second is stopped by the last test, mid-answer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.conftest import REPO, finished
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.antler_up import AntlerUp, UpStack, antler_in, up_in
from tests.support.doc_blocks import VENV, fenced_blocks, reader_env, run_block

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("antler-up-e2e"),
    pytest.mark.timeout(300),
]
README = REPO / "README.md"
KEY = "sk-first-hour"


def readme_section(title: str) -> tuple[int, int]:
    """The README's lines (first, last) of the section headed `## <title>`."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start + 1, end


def blocks_of(title: str, lang: str) -> list[str]:
    first, last = readme_section(title)
    return [b.code for b in fenced_blocks(README) if b.lang == lang and first <= b.line <= last]


def kind(line: str) -> str:
    """What a line of `antler up` says, without its details: `nats-server running`, `Gateway`."""
    return re.split(r"[:(]", line, maxsplit=1)[0].strip()


# ------------------------------------------------------------------ antler up with no model


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def no_model(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AntlerUp]:
    workdir = tmp_path_factory.mktemp("no-model")
    # Only a free port (tests must not take 2026): no model, everything else on its defaults.
    (workdir / "config.yaml").write_text(yaml.safe_dump({"gateway": {"port": 0}}), encoding="utf-8")
    async with up_in(workdir) as up:
        yield up


async def test_up_without_a_model_says_so_last_with_the_lines_to_add(no_model: AntlerUp) -> None:
    await no_model.wait_for_line("/health reports the runner degraded", stream="console")
    console = [line for line in no_model.console() if line.strip()]
    assert console[-1] == "/health reports the runner degraded until then.", console[-12:]
    said = "\n".join(console[console.index(next(c for c in console if c.startswith("Antler is up"))) :])
    assert "Antler cannot answer yet: no model is configured" in said, said
    assert str(no_model.workdir / "config.yaml") in said, "which file to put it in"
    # The two lines to add are YAML a newcomer can paste: a model with its endpoint.
    pasted = yaml.safe_load("\n".join(c for c in console if c.startswith("  ")))
    model = pasted["models"][0]
    assert {"name", "model", "api_key", "base_url"} <= model.keys(), pasted


async def test_health_reports_the_runner_degraded_for_want_of_a_model(no_model: AntlerUp) -> None:
    gateway = await no_model.gateway_url()
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        body = (await http.get("/health")).json()
    assert body["status"] == "degraded", body
    assert "no model configured" in body["degraded"]["runner"], body
    assert "models:" in body["degraded"]["runner"], "and what to add"


async def test_the_console_is_the_readmes_few_lines_and_the_rest_is_in_the_log_file(
    no_model: AntlerUp,
) -> None:
    (shown,) = [b for b in blocks_of("Running it", "text") if b.startswith("$ antler up")]
    readme = [kind(line) for line in shown.splitlines()[1:]]
    assert len(readme) <= 10, "a few lines"
    # Everything but warnings this host gives (a sandbox without cgroup v2, say) and the model's advice.
    console = no_model.console()
    until_up = console[: 1 + next(i for i, line in enumerate(console) if "Antler is up" in line)]
    stderr = [kind(line) for line in until_up if " WARNING " not in line and line.strip()]
    stdout = [kind(line) for line in no_model._lines(no_model.out_path) if line.strip()]
    assert stderr == [k for k in readme if k not in stdout], console
    assert stdout == [k for k in readme if k in stdout], stdout
    log_line = next(line for line in until_up if line.startswith("log: "))
    log_file = Path(log_line.split()[1])
    assert log_file == no_model.log_path
    logged = "\n".join(no_model._lines(log_file))
    for routine in ("created stream", "runner: ready", "sandbox: ready", "gateway listening on"):
        assert routine in logged, f"{routine!r} is in the log file"
        assert all(routine not in line for line in console), f"{routine!r} is not on the console"


# ------------------------------------------------------------------ the README's first turn


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def readme_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpStack]:
    workdir = tmp_path_factory.mktemp("first-turn")
    hosted = yaml.safe_load(blocks_of("A first turn", "yaml")[0])
    async with FakeOpenAI(api_key=KEY) as model:
        # The block as written, but for where the model answers; and a free port (tests must not take 2026).
        hosted["models"][0]["base_url"] = model.base_url
        (workdir / "config.yaml").write_text(
            yaml.safe_dump({**hosted, "gateway": {"port": 0}}), encoding="utf-8"
        )
        (workdir / ".venv").symlink_to(VENV)  # the reader's `. .venv/bin/activate`
        async with up_in(workdir, {"OPENAI_API_KEY": KEY}) as up:
            yield UpStack(up, model, await up.gateway_url())


def reader() -> dict[str, str]:
    """A reader's second terminal, where they exported their key too."""
    return {**reader_env(REPO), "OPENAI_API_KEY": KEY}


async def test_the_readmes_first_turn_works_as_written(readme_stack: UpStack) -> None:
    console = [line for line in readme_stack.up.console() if line.strip()]
    assert console[-1].startswith("Antler is up"), "a model that can be used: nothing more to say"
    async with httpx.AsyncClient(base_url=readme_stack.gateway, timeout=10) as http:
        body = (await http.get("/health")).json()
    assert "runner" not in body["degraded"], body

    (block,) = [b for b in fenced_blocks(README) if b.marker == "needs-antler" and "antler send" in b.code]
    code, output = await asyncio.to_thread(run_block, block, readme_stack.up.workdir, reader())
    assert code == 0, output
    assert "You said: hello" in output
    # What needs nothing: the keyless web tools came with the model alone.
    offered = {tool["function"]["name"] for tool in readme_stack.model.agent_requests[-1]["tools"]}
    assert {"web_search", "web_fetch", "image_search"} <= offered, offered


async def test_send_shows_the_steps_on_stderr_and_only_the_answer_on_stdout(readme_stack: UpStack) -> None:
    readme_stack.model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo FIRST-HOUR-STEP"})], when="STEP-MARK"),
        Reply(text="It printed the word.", when="FIRST-HOUR-STEP"),
    )
    proc = await antler_in(readme_stack.up.workdir, "send", "STEP-MARK run it", "--chat", "steps")
    code, out, err = await finished(proc, 120)
    assert code == 0, err
    assert out == "It printed the word.\n", "stdout is the answer alone, for scripts"
    assert "· bash: echo FIRST-HOUR-STEP" in err.splitlines(), err


async def test_send_says_the_bus_is_gone_and_exits_when_antler_up_stops_mid_answer(
    readme_stack: UpStack,
) -> None:
    held = asyncio.Event()
    readme_stack.model.script(Reply(text="too late", when="GONE-MARK", hold=held))
    proc = await antler_in(readme_stack.up.workdir, "send", "GONE-MARK wait for it", "--chat", "gone")
    try:
        await readme_stack.model.wait_until(lambda: readme_stack.model.holding == 1, timeout=60)
        assert await readme_stack.up.stop(90) == 0, readme_stack.up.tail()  # Ctrl-C, mid-answer
        code, out, err = await finished(proc, 60)  # before: it never returned
    finally:
        held.set()
        if proc.returncode is None:
            proc.kill()
    assert code == 4, (code, out, err)
    assert "lost the bus" in err, err
    assert "antler up stopped?" in err, err
    assert err.count("Connection refused") <= 1, f"not a warning twice a second:\n{err}"
