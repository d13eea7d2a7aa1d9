"""`antler user add|list|passwd|remove`: manage the accounts people sign in with (DeerFlow's web UI).

Accounts live on the bus (KV `<prefix>_users`), so this talks to the NATS of
a running `antler up` (or `--nats-url`); gateways see a change at once. A
password is asked twice on the terminal, or read as one line from standard
input with `--password-stdin` (for scripts).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Literal

from antler._common import CliError, load, login, nats_url, setup_logging
from gateway.accounts import AccountError, AccountStore, check_password


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            raise CliError("the two passwords differ; nothing changed", code=2)
    try:
        return check_password(password)
    except AccountError as exc:
        raise CliError(f"{exc}; nothing changed", code=2) from None


async def user(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    # Ask for the password before connecting: a typo should not wait on the network.
    password = _password(args) if args.user_command in ("add", "passwd") else ""
    # As the admin `antler up` made for its embedded server (or the user config.yaml names), like
    # every other command: with per-component users on, an anonymous connection is refused.
    bus = await login(config).connect(nats_url(args, config), "antler-user")
    try:
        accounts = await AccountStore.open(bus)
        if args.user_command == "list":
            found = await accounts.all()
            if not found:
                print("no accounts yet (antler user add EMAIL --admin)")
                return 0
            print(f"{'EMAIL':36} {'ROLE':6} {'USER ID':34} CREATED")
            for account in found:
                created = account.created_at.strftime("%Y-%m-%d %H:%M")
                print(f"{account.email:36} {account.system_role:6} {account.user_id:34} {created}")
            return 0
        if args.user_command == "add":
            role: Literal["admin", "user"] = "admin" if args.admin else "user"
            account = await accounts.create(args.email, password, role=role, user_id=args.user_id)
            print(f"added {account.email} ({role}, user id {account.user_id})")
            return 0
        if args.user_command == "passwd":
            account = await accounts.set_password(args.email, password)
            print(f"changed the password of {account.email}; its sessions have ended")
            return 0
        account = await accounts.remove(args.email)
        print(f"removed {account.email}; the threads and files of user {account.user_id} are kept")
        return 0
    except AccountError as exc:
        raise CliError(str(exc), code=1) from None
    finally:
        await bus.close()
