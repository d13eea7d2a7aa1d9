"""Every `antler` verb against a stack on `antler up` defaults, run from another directory.

A user starts `antler up` next to their config.yaml and later runs the other verbs from wherever
they are, pointing at that config (`-c` or `$ANTLER_CONFIG_PATH`): each must find the data dir
beside the file, and with it the URL and the admin's credentials of the embedded server (which
has per-component users on by default). Without them, a verb says which credentials it needs.

The stack is the shared one (tests/support/shared_up.py): `antler up` on its defaults in a
directory holding its config.yaml, the verbs run from directories of the test's own.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from tests.conftest import finished, run_antler
from tests.fakes.openai_server import Reply
from tests.support.shared_up import SHARED_UP, SharedUp

pytestmark = [*SHARED_UP, pytest.mark.timeout(300)]


async def antler(*args: str, cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None) -> str:
    """Run a verb to its end; its standard output (it must exit 0)."""
    proc = await run_antler(*args, cwd=cwd, env=env, stdin=True)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode == 0, f"antler {' '.join(args)} exited {proc.returncode}: {err.decode()}"
    return out.decode()


async def test_every_verb_finds_the_stack_next_to_its_config(shared_up: SharedUp, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    stack = shared_up.config
    c = ("-c", str(stack))

    shared_up.model.script(Reply(text="Hello from the other directory.", when="VERBS-HI"))
    assert (await antler("send", "VERBS-HI", "--chat", "verbs", *c, cwd=elsewhere)).strip() == (
        "Hello from the other directory."
    )
    # The same through $ANTLER_CONFIG_PATH.
    shared_up.model.script(Reply(text="Found by the environment.", when="VERBS-AGAIN"))
    out = await antler(
        "send", "VERBS-AGAIN", "--chat", "verbs", cwd=elsewhere, env={"ANTLER_CONFIG_PATH": str(stack)}
    )
    assert out.strip() == "Found by the environment."

    tail = await run_antler("tail", "chat.in.>", "-n", "1", *c, cwd=elsewhere, env={"COLUMNS": "200"})
    assert tail.stderr is not None
    assert b"tailing" in await asyncio.wait_for(tail.stderr.readline(), 60)
    shared_up.model.script(Reply(text="Seen by tail.", when="VERBS-WATCHED"))
    await antler("send", "VERBS-WATCHED", "--chat", "verbs", *c, cwd=elsewhere)
    code, out, err = await finished(tail, 60)
    assert code == 0, err
    assert '"text": "VERBS-WATCHED"' in out

    first, second = b"a long passphrase\n", b"another passphrase\n"
    async with shared_up.accounts_left_as_found():  # also when it fails half-way
        await antler(
            "user", "add", "ops@example.com", "--admin", "--password-stdin", *c, cwd=elsewhere, stdin=first
        )
        assert "ops@example.com" in await antler("user", "list", *c, cwd=elsewhere)
        await antler("user", "passwd", "ops@example.com", "--password-stdin", *c, cwd=elsewhere, stdin=second)
        await antler("user", "remove", "ops@example.com", *c, cwd=elsewhere)
        assert "ops@example.com" not in await antler("user", "list", *c, cwd=elsewhere)

    assert "empty" in await antler("dlq", "list", *c, cwd=elsewhere)
    await antler("provision", *c, cwd=elsewhere)
    creds = await antler("creds", *c, cwd=elsewhere)
    assert "authorization" in creds
    schema = json.loads(await antler("schema", "InboundMessage", cwd=elsewhere))
    assert "chat_id" in schema["properties"]

    # A component of ours joins the running stack as its own user and leaves on SIGTERM.
    joined = await run_antler("run", "memory", *c, cwd=elsewhere)
    try:
        assert joined.stderr is not None
        while b"memory: ready" not in (line := await asyncio.wait_for(joined.stderr.readline(), 60)):
            assert line, "antler run memory ended before it was ready"
    finally:
        joined.send_signal(signal.SIGTERM)
    code, _, err = await finished(joined, 60)
    assert code == 0, err


async def test_a_verb_without_credentials_says_which_it_needs(shared_up: SharedUp, tmp_path: Path) -> None:
    url = (shared_up.config.parent / ".antler" / "nats.url").read_text().strip()
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    code, _, err = await finished(await run_antler("send", "hi", "--nats-url", url, cwd=nowhere), 60)
    assert code == 2, err
    assert "refused the login" in err
    assert "nats-users.json" in err
    assert "ANTLER_NATS_USER" in err
    assert "Traceback" not in err
