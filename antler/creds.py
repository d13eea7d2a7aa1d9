"""`antler creds`: NATS users for an operator's own cluster; `antler provision`: its streams and buckets.

`creds` prints (or, with --out, writes) a nats-server `authorization` block with one
user per component, each allowed only the subjects it needs (`bus.permissions`),
plus an admin, and each component's credentials as environment lines
(ANTLER_NATS_USER, ANTLER_NATS_PASSWORD) to give that component alone. Writing to a
directory that already holds them keeps the passwords, so servers and components
stay in step. Components with their own user do not create streams: run
`antler provision` once as the admin first.

`creds --channel <name>` and `creds --agent-owner <owner>` mint a user for a client instead
(`bus.clients`: a script's channel, or agent-protocol callers of one owner), give it to the
embedded server `antler up` runs on the data dir (a reload: no restart), and print its `nats`
CLI context (or write it: --file, or --context <name> into ~/.config/nats/context), which
`antler send --creds` and the agent protocol's client SDK read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from antler._common import CliError, load, login, nats_url, setup_logging, status
from bus.clients import (
    CLIENTS_FILE,
    ClientKind,
    InvalidScope,
    client_nats_users,
    context,
    embedded_authorization,
    mint,
    owner_key,
)
from bus.errors import BusError, ServerStartError
from bus.launcher import NATS_PASSWORD_ENV, NATS_USER_ENV, LaunchError
from bus.permissions import ADMIN, NatsUser, generate_users, save_users, server_block, users_for
from bus.provision import provision as provision_bus
from bus.server import reload_running
from bus.subjects import Subjects
from config import AppConfig

SERVER_FILE = "nats-auth.conf"
SAVED_FILE = "nats-users.json"


def env_lines(user: NatsUser) -> str:
    return f"{NATS_USER_ENV}={user.user}\n{NATS_PASSWORD_ENV}={user.password}\n"


def creds(args: argparse.Namespace) -> int:
    config = load(args)
    subjects = Subjects(config.bus.prefix)
    if args.channel or args.agent_owner:
        return mint_client(args)
    if args.out:
        out = Path(args.out)
        users = users_for(subjects, out / SAVED_FILE)
        save_users(out / SAVED_FILE, users)
        clients = client_nats_users(subjects, out / CLIENTS_FILE)
        _write_private(out / SERVER_FILE, server_block(users + clients))
        for user in users:
            _write_private(out / f"{user.component}.env", env_lines(user))
        status(
            f"wrote {out / SERVER_FILE} (include it in every nats-server's config) and one "
            f"<component>.env per component ({', '.join(u.component for u in users)}) to {out}"
        )
        return 0
    users = generate_users(subjects)
    print("# --- nats-server: put this in every server's config (or `include` it) ---")
    print(server_block(users))
    for user in users:
        who = "the admin: antler provision, antler up/send/tail/dlq" if user.component == ADMIN else ""
        print(f"# --- {user.component}{': ' + who if who else ''} (give it to this component only) ---")
        print(env_lines(user))
    return 0


def mint_client(args: argparse.Namespace) -> int:
    """`creds --channel` / `--agent-owner`: the client's user, live on the embedded server, as a context."""
    if args.channel and args.agent_owner:
        raise CliError("give --channel or --agent-owner, not both", code=2)
    config = load(args)
    subjects = Subjects(config.bus.prefix)
    data_dir = Path(config.bus.data_dir)
    kind: ClientKind = "channel" if args.channel else "agents"
    try:
        client = mint(subjects, data_dir / CLIENTS_FILE, kind, args.channel or args.agent_owner)
    except InvalidScope as exc:
        raise CliError(str(exc), code=2) from None
    try:
        reloaded = reload_running(data_dir, embedded_authorization(subjects, data_dir))
    except ServerStartError as exc:
        raise CliError(str(exc)) from None
    if reloaded:
        status(f"user {client.user} is live on the embedded nats-server of {data_dir}")
    if kind == "agents":
        await_enable = enable_owner(args, config, client.scope)
        asyncio.run(await_enable)
    else:
        status(
            f"no embedded nats-server runs on {data_dir}: `antler up` there takes {client.user} at its "
            "start; for servers of your own, `antler creds --out <dir>` writes it into nats-auth.conf"
        )
    try:
        url: str | None = nats_url(args, config)
    except LaunchError:
        url = None
    text = json.dumps(context(client, subjects, url), indent=2) + "\n"
    target = Path(args.file) if args.file else None
    if args.context:
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        target = config_home / "nats" / "context" / f"{args.context}.json"
    if target is None:
        print(text, end="")
    else:
        _write_private(target, text)
        status(f"wrote {target}: `antler send --creds {target} ...` uses it from any directory")
    return 0


async def enable_owner(args: argparse.Namespace, config: AppConfig, owner: str) -> None:
    """Tell the agent hosts (`agentproto`) to serve `owner`'s agents (a settings key, as the admin)."""
    try:
        url = nats_url(args, config)
        bus = await login(config).connect(url, "antler-creds", provision=False)
    except (LaunchError, BusError) as exc:
        status(f"owner {owner} not enabled on the bus yet ({exc}); run this again once it is up")
        return
    try:
        settings = await bus.kv(bus.subjects.settings_bucket)
        await settings.put(owner_key(owner), json.dumps({"owner": owner}).encode())
        status(f"owner {owner}: their agents are on the NATS agent protocol (agents.*.*.{owner}.*)")
    finally:
        await bus.close()


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text, encoding="utf-8")


async def provision(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    url = nats_url(args, config)
    bus = await login(config).connect(url, "antler-provision")
    try:
        # Connecting provisioned; the operator's run also removes a drained pre-split CHAT_IN.
        await provision_bus(bus, retire=True)
    finally:
        await bus.close()
    status(f"streams, KV buckets and object store under prefix '{config.bus.prefix}' are ready at {url}")
    return 0
