"""`antler user` as an operator runs it: a real process against the test's nats-server."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from bus import Bus
from config import BusConfig
from gateway.accounts import AccountStore, verify_password
from tests.conftest import REPO


async def antler_user(
    nats_url: str, prefix: str, data_dir: Path, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """`antler user ...` pointed at the stack's data dir: it logs in as the admin `antler up` saved there."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "antler",
        "user",
        *args,
        "--nats-url",
        nats_url,
        "--prefix",
        prefix,
        "--data-dir",
        str(data_dir),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_add_list_passwd_and_remove_an_account(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path
) -> None:
    def user(*args: str, stdin: str = "") -> asyncio.Future[tuple[int, str, str]]:
        return asyncio.ensure_future(
            antler_user(nats_url, bus_config.prefix, tmp_path / "data", *args, stdin=stdin)
        )

    code, out, err = await user(
        "add",
        "Ops@Example.com",
        "--admin",
        "--user-id",
        "ana",
        "--password-stdin",
        stdin="first passphrase\n",
    )
    assert code == 0, err
    assert out.strip() == "added ops@example.com (admin, user id ana)"
    accounts = await AccountStore.open(bus)
    account = await accounts.get("ops@example.com")
    assert account is not None
    assert account.system_role == "admin"
    assert await verify_password("first passphrase", account.password_hash)

    code, _, err = await user("add", "ops@example.com", "--password-stdin", stdin="another one\n")
    assert code == 1
    assert "ops@example.com already has an account" in err
    code, _, err = await user("add", "short@example.com", "--password-stdin", stdin="short\n")
    assert code == 2
    assert "at least 8 characters" in err
    assert await accounts.get("short@example.com") is None

    code, out, _ = await user("list")
    assert "ops@example.com" in out
    assert "admin" in out
    assert " ana " in out

    code, out, err = await user("passwd", "ops@example.com", "--password-stdin", stdin="second passphrase\n")
    assert code == 0, err
    changed = await accounts.get("ops@example.com")
    assert changed is not None
    assert await verify_password("second passphrase", changed.password_hash)
    assert not await verify_password("first passphrase", changed.password_hash)
    assert changed.token_version == account.token_version + 1, "its sessions end"

    code, out, err = await user("remove", "ops@example.com")
    assert code == 0, err
    assert await accounts.get("ops@example.com") is None
    assert await accounts.count() == 0
    code, _, err = await user("remove", "ops@example.com")
    assert code == 1
    assert "no account has the e-mail address ops@example.com" in err
