"""`antler creds --channel`: a script gets a NATS user of its own, not the admin's, on a running `antler up`.

The shared `antler up` child (tests/support/shared_up.py: per-component users, as on defaults; its
tripwire allows only the refusals of these scripts' users). The credentials are minted while it
runs (the embedded server takes the new user without a restart) and used the way a user would:
`antler send --creds <file>` from a directory with no config.yaml and no data dir, and a raw
nats-py script that tries to step outside its channel.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio

from tests.conftest import finished, run_antler
from tests.support.antler_up import AntlerUp
from tests.support.shared_up import PREFIX, SHARED_UP, SharedUp

pytestmark = SHARED_UP


@pytest.fixture
def up(shared_up: SharedUp) -> AntlerUp:
    return shared_up.up


async def mint(up: AntlerUp, *args: str) -> dict[str, Any]:
    code, out, err = await finished(await run_antler("creds", *args, cwd=up.workdir))
    assert code == 0, err
    assert "is live on the embedded nats-server" in err
    return dict(json.loads(out))


async def test_script_with_minted_channel_creds_gets_its_reply_from_any_directory(
    up: AntlerUp, tmp_path: Path
) -> None:
    context = await mint(up, "--channel", "scripts")
    assert context["user"] == f"{PREFIX}-client-channel-scripts"
    creds = tmp_path / "scripts.json"
    creds.write_text(json.dumps(context), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    code, out, err = await finished(
        await run_antler("send", "--creds", str(creds), "--chat", "c1", "hello from a script", cwd=elsewhere),
        timeout=120,
    )

    assert code == 0, err
    assert "You said: hello from a script" in out


async def test_antler_send_takes_a_nats_cli_context_by_name(up: AntlerUp, tmp_path: Path) -> None:
    config_home = tmp_path / "config-home"
    code, _, err = await finished(
        await run_antler(
            "creds", "--channel", "scripts", "--context", "antler-scripts",
            cwd=up.workdir, env={"XDG_CONFIG_HOME": str(config_home)},
        )
    )  # fmt: skip
    assert code == 0, err
    assert (config_home / "nats" / "context" / "antler-scripts.json").is_file()

    code, out, err = await finished(
        await run_antler(
            "send", "--context", "antler-scripts", "--chat", "c2", "hello by context",
            cwd=tmp_path, env={"XDG_CONFIG_HOME": str(config_home)},
        ),
        timeout=120,
    )  # fmt: skip

    assert code == 0, err
    assert "You said: hello by context" in out


async def test_an_owner_the_agent_protocol_cannot_carry_is_refused_with_a_clear_message(
    tmp_path: Path,
) -> None:
    code, _, err = await finished(
        await run_antler("creds", "--agent-owner", "Alice.Smith", "--data-dir", str(tmp_path), cwd=tmp_path)
    )
    assert code == 2
    assert "'Alice.Smith' is not a valid name here" in err
    assert not (tmp_path / "nats-clients.json").exists()


async def test_minting_the_same_channel_again_gives_the_same_credentials(up: AntlerUp) -> None:
    first = await mint(up, "--channel", "reports")
    second = await mint(up, "--channel", "reports")
    assert (first["user"], first["password"]) == (second["user"], second["password"])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripts_channel(shared_up_session: SharedUp) -> dict[str, Any]:
    """The `scripts` channel's credentials, minted once for the tests that only use them."""
    return await mint(shared_up_session.up, "--channel", "scripts")


@pytest.mark.parametrize(
    ("action", "subject"),
    [
        pytest.param("publish", f"{PREFIX}.chat.in.telegram", id="publish-on-another-channel"),
        pytest.param("subscribe", f"{PREFIX}.chat.out.telegram", id="read-another-channels-replies"),
        pytest.param("subscribe", f"{PREFIX}.runs.ev.>", id="read-the-run-events"),
        pytest.param("publish", f"{PREFIX}.runs.submit", id="submit-a-run"),
        pytest.param(
            "publish", f"$JS.API.CONSUMER.CREATE.{PREFIX.upper()}_RUNS", id="consume-the-runs-stream"
        ),
        pytest.param(
            "publish", f"$JS.API.STREAM.MSG.GET.{PREFIX.upper()}_RUN_EVENTS_0", id="read-run-events"
        ),
    ],
)
async def test_channel_creds_cannot_step_outside_their_channel(
    up: AntlerUp, scripts_channel: dict[str, Any], action: str, subject: str
) -> None:
    context = scripts_channel
    user, password = _admin(up)
    errors: asyncio.Queue[Exception] = asyncio.Queue()

    async def on_error(exc: Exception) -> None:
        errors.put_nowait(exc)

    script = await nats.connect(
        context["url"],
        user=context["user"],
        password=context["password"],
        inbox_prefix=context["inbox_prefix"],
        error_cb=on_error,
    )
    admin = await nats.connect(context["url"], user=user, password=password)
    try:
        seen: list[bytes] = []

        async def watch(msg: Any) -> None:
            seen.append(msg.data)

        # The admin listens where the script tries to publish (a core subscription sees every message).
        await admin.subscribe(subject.replace(">", "*"), cb=watch)
        await admin.flush()
        if action == "publish":
            await script.publish(subject, b'{"v": 1}')
        else:
            got: list[bytes] = []

            async def listen(msg: Any) -> None:
                got.append(msg.data)

            await script.subscribe(subject, cb=listen)
        await script.flush()
        refusal = await asyncio.wait_for(errors.get(), 10)
        assert "permissions violation" in str(refusal).lower()
        assert subject.lower() in str(refusal).lower()
        if action == "subscribe":
            await admin.publish(subject.replace(">", "x"), b"secret")
            await admin.flush()
            await script.flush()  # a round trip after the admin's message: it would have arrived by now
            assert got == []
        else:
            await admin.flush()
            assert seen == []  # nothing the script published was delivered
    finally:
        await script.close()
        await admin.close()


def _admin(up: AntlerUp) -> tuple[str, str]:
    saved = json.loads((up.data_dir / "nats-users.json").read_text(encoding="utf-8"))["admin"]
    return saved["user"], saved["password"]
