"""`antler creds`: NATS users for an operator's own cluster; `antler provision`: its streams and buckets.

`creds` prints (or, with --out, writes) a nats-server `authorization` block with one
user per component, each allowed only the subjects it needs (`bus.permissions`),
plus an admin, and each component's credentials as environment lines
(ANTLER_NATS_USER, ANTLER_NATS_PASSWORD) to give that component alone. Writing to a
directory that already holds them keeps the passwords, so servers and components
stay in step. Components with their own user do not create streams: run
`antler provision` once as the admin first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from antler._common import load, login, nats_url, setup_logging, status
from bus.launcher import NATS_PASSWORD_ENV, NATS_USER_ENV
from bus.permissions import ADMIN, NatsUser, generate_users, save_users, server_block, users_for
from bus.subjects import Subjects

SERVER_FILE = "nats-auth.conf"
SAVED_FILE = "nats-users.json"


def env_lines(user: NatsUser) -> str:
    return f"{NATS_USER_ENV}={user.user}\n{NATS_PASSWORD_ENV}={user.password}\n"


def creds(args: argparse.Namespace) -> int:
    config = load(args)
    subjects = Subjects(config.bus.prefix)
    if args.out:
        out = Path(args.out)
        users = users_for(subjects, out / SAVED_FILE)
        save_users(out / SAVED_FILE, users)
        _write_private(out / SERVER_FILE, server_block(users))
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
    await bus.close()
    status(f"streams, KV buckets and object store under prefix '{config.bus.prefix}' are ready at {url}")
    return 0
