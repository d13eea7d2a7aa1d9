"""Argument parsing and dispatch for the `antler` command."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from antler._common import add_common
from bus.launcher import exit_code
from bus.runtime import run_main

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # what add_subparsers returns

DESCRIPTION = """\
Antler: an AI super agent whose components talk over NATS/JetStream.

  antler up                       start everything on the embedded defaults
  antler send "hello"             chat with the agent from this terminal
  antler tail 'runs.ev.>'         watch run events go by
  antler top                      processes, queues, rates and runs in flight, live
  antler dlq list                 see messages that could not be processed
  antler user add me@x.org --admin  an account for DeerFlow's web UI
  antler schedule add every weekday 08:00 Europe/Berlin summarize the news
  antler audit --user ana --since 1d  who did what: sign-ins, roles, runs, tool calls
"""


def _up(sub: SubParsers) -> None:
    p = sub.add_parser(
        "up",
        help="start an embedded nats-server and every component, until Ctrl-C",
        description="Start an embedded nats-server (JetStream under bus.data_dir) and every component in "
        "this process, each on its own NATS connection. Prints the nats:// URL it serves. "
        "With bus.url (or --nats-url) set, uses that NATS instead of starting one.",
    )
    add_common(p)


def _run(sub: SubParsers) -> None:
    p = sub.add_parser(
        "run",
        help="run one component against a NATS server",
        description="Run one component (a registered name, or module:function) until SIGTERM/SIGINT, "
        "then drain it: in-flight messages finish or are released, nothing is lost.",
    )
    p.add_argument("component", help="component name (see `antler up` output) or module:function")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run this many processes of it, forked from one that loaded it, so they share that memory "
        "(Linux; one that dies is started again, anew)",
    )
    p.add_argument(
        "--log-file",
        help="write the log to this file too; the console then shows only warnings and errors "
        "(-v: everything). antler up gives its components <data_dir>/antler.log",
    )
    add_common(p)


def _send(sub: SubParsers) -> None:
    p = sub.add_parser(
        "send",
        help="send a chat message on channel cli and print the streamed reply",
        description="Publish an InboundMessage (channel cli by default) and print the agent's reply as it "
        "streams. The chat id defaults to cli-<your user name>, so a conversation continues across calls.",
    )
    p.add_argument("text", nargs="*", help="the message (read from stdin when omitted)")
    p.add_argument("--chat", help="chat id (default: cli-<user>)")
    p.add_argument("--user", help="user id (default: your login name)")
    p.add_argument("--channel", help="channel name (default: the credentials' channel, else cli)")
    p.add_argument(
        "--creds",
        help="a nats context JSON from `antler creds --channel` (URL, user, prefix), from any directory",
    )
    p.add_argument("--context", help="like --creds, the nats context ~/.config/nats/context/<CONTEXT>.json")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the final reply")
    p.add_argument("--no-wait", action="store_true", help="publish and exit without waiting for a reply")
    add_common(p)


def _tail(sub: SubParsers) -> None:
    p = sub.add_parser(
        "tail",
        help="print bus traffic matching a subject pattern",
        description="Subscribe to a subject pattern (relative to the prefix, e.g. 'runs.ev.>', or absolute) "
        "and print one line per message: time, subject, ids and the JSON payload.",
    )
    p.add_argument(
        "pattern", nargs="?", default=">", help="subject pattern (default: everything under the prefix)"
    )
    p.add_argument("--full", action="store_true", help="pretty-print whole payloads instead of one line each")
    p.add_argument("-n", "--count", type=int, default=0, help="exit after this many messages")
    add_common(p)


def _top(sub: SubParsers) -> None:
    p = sub.add_parser(
        "top",
        help="a live view of the running installation, from the bus",
        description="Processes and their components (CPU, memory, runs, messages in hand), each "
        "durable's queue, rates and errors, runs in flight and the slowest recent turns; redrawn in "
        "place until Ctrl-C.",
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between frames (default 2)")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    add_common(p)


def _schema(sub: SubParsers) -> None:
    p = sub.add_parser(
        "schema",
        help="print the JSON Schemas of the bus envelopes",
        description="Print JSON Schemas of the envelopes (all, or the ones named), so programs in any "
        "language can produce and check bus messages.",
    )
    p.add_argument("names", nargs="*", help="envelope names (default: all)")
    p.add_argument("--list", action="store_true", help="list envelope names with a one-line summary")
    p.add_argument("--out", help="write one <Name>.schema.json file per envelope into this directory")


def _creds(sub: SubParsers) -> None:
    p = sub.add_parser(
        "creds",
        help="print NATS users for your own NATS cluster, or mint one for a script or agent-protocol client",
        description="Print a nats-server authorization block with one user per component, each allowed "
        "only the subjects it needs (plus an admin), and each component's credentials as "
        "ANTLER_NATS_USER/ANTLER_NATS_PASSWORD lines. With --out, write nats-auth.conf and one "
        "<component>.env per component to a directory (passwords already there are kept). With --channel or "
        "--agent-owner, mint a user for a client instead and print its nats context.",
    )
    p.add_argument("--out", help="directory to write nats-auth.conf, <component>.env and nats-users.json to")
    p.add_argument(
        "--channel",
        help="mint a user for one script channel (publish chat.in.<channel>, read chat.out.<channel>)",
    )
    p.add_argument(
        "--agent-owner", help="mint a user for NATS agent protocol clients acting for this owner (a user id)"
    )
    p.add_argument("--file", help="with --channel/--agent-owner: write the nats context JSON here")
    p.add_argument(
        "--context", help="with --channel/--agent-owner: write it as ~/.config/nats/context/<CONTEXT>.json"
    )
    add_common(p, nats=True)


def _provision(sub: SubParsers) -> None:
    p = sub.add_parser(
        "provision",
        help="create the streams, KV buckets and object store (as the admin), then exit",
        description="Create or update the streams, KV buckets and object store on the NATS in use. "
        "Components connecting as their own users (antler creds) leave this to the admin.",
    )
    add_common(p)


def _dlq(sub: SubParsers) -> None:
    p = sub.add_parser(
        "dlq",
        help="list, show or replay dead-lettered messages",
        description="Messages that failed too often, or were malformed, wait in the dead-letter stream "
        "with the reason. List them, show one, or replay them onto their original subject.",
    )
    dlq_sub = p.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)
    q = dlq_sub.add_parser("list", help="list dead letters, oldest first", description="List dead letters.")
    q.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    add_common(q)
    q = dlq_sub.add_parser("show", help="show one dead letter's headers and payload", description="Show one.")
    q.add_argument("seq", type=int, help="sequence number from `antler dlq list`")
    add_common(q)
    q = dlq_sub.add_parser(
        "replay",
        help="publish dead letters again on their original subjects",
        description="Publish dead letters again on their original subjects (with a fresh Nats-Msg-Id), "
        "then remove them from the DLQ unless --keep.",
    )
    q.add_argument("seqs", nargs="*", type=int, help="sequence numbers")
    q.add_argument("--all", action="store_true", help="replay every dead letter")
    q.add_argument("--keep", action="store_true", help="keep them in the DLQ after replaying")
    q.add_argument(
        "--rerun",
        action="store_true",
        help="a run's request whose run has ended (given up, it told its chat so) runs again as a new "
        "run, whose answer goes to the same chat or caller; without it such requests are not replayed",
    )
    add_common(q)


def _sandbox(sub: SubParsers) -> None:
    p = sub.add_parser(
        "sandbox",
        help="install the sandbox's toolbox, or say what sandboxed commands get",
        description="The toolbox is a Python environment for sandboxed commands with the packages of "
        "sandbox.toolbox.python_packages (pandas, matplotlib, python-pptx, ...), installed once per "
        "installation (shared by every data dir) and mounted read-only into every sandbox; antler up "
        "builds it in the background when none is current.",
    )
    box_sub = p.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    q = box_sub.add_parser(
        "install",
        help="install the toolbox (a no-op when it is current)",
        description="Install the toolbox unless it was built for this package list.",
    )
    add_common(q, nats=False)
    q = box_sub.add_parser(
        "doctor",
        help="say what a sandboxed command gets: isolation, python and its packages, node",
        description="Run a probe through the configured sandbox provider and report the isolation, the "
        "python3 a command finds with each toolbox package's version, and Node.js. Exits 1 when the "
        "toolbox is missing, out of date or lacks a package.",
    )
    add_common(q, nats=False)
    q = box_sub.add_parser(
        "check",
        help="try what the sandbox holds on this host: namespaces, seccomp, descriptors, memory, processes",
        description="Run probe commands through the configured sandbox provider and print, as a table, "
        "what holds on this host: its namespaces, user and capabilities, seccomp, the descriptors a "
        "command finds open, the memory and process limits (tried for real, with small limits), CPU, "
        "disk and network. Exits 1 when something does not hold.",
    )
    add_common(q, nats=False)


def _user(sub: SubParsers) -> None:
    p = sub.add_parser(
        "user",
        help="add, list, change or remove the accounts people sign in with",
        description="Accounts for signing in to the gateway (DeerFlow's web UI), kept on the bus. An "
        "account's user id is whose threads and files it reaches, as with gateway.tokens.",
    )
    user_sub = p.add_subparsers(dest="user_command", metavar="ACTION", required=True)
    q = user_sub.add_parser("add", help="add an account", description="Add an account; asks its password.")
    q.add_argument("email", help="the e-mail address it signs in with")
    q.add_argument("--admin", action="store_true", help="may change MCP servers and other settings")
    q.add_argument(
        "--user-id",
        help="whose threads it reaches (default: a new id); name a gateway.tokens user id to share theirs",
    )
    q.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add_common(q)
    q = user_sub.add_parser("list", help="list accounts", description="List accounts.")
    add_common(q)
    q = user_sub.add_parser(
        "passwd",
        help="set an account's password",
        description="Set a new password; the account's sessions end.",
    )
    q.add_argument("email")
    q.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add_common(q)
    q = user_sub.add_parser(
        "remove",
        help="remove an account",
        description="Remove an account (its sessions end); its user's threads and files are kept.",
    )
    q.add_argument("email")
    add_common(q)


def _bench(sub: SubParsers) -> None:
    from antler.bench import add_arguments

    add_arguments(sub)


def _schedule(sub: SubParsers) -> None:
    from antler.schedule import add_arguments

    add_arguments(sub, add_common)


def _audit(sub: SubParsers) -> None:
    p = sub.add_parser(
        "audit",
        help="print the audit trail: sign-ins, role changes, runs, tool calls, refusals",
        description="Print audit records (stream <PREFIX>_AUDIT), oldest first, filtered as GET "
        "/api/v1/audit filters them; with --follow, go on printing new ones until Ctrl-C.",
    )
    p.add_argument("--user", help="records about or by this user id")
    p.add_argument("--action", help="only this action (sign_in, role_changed, run_started, tool_call, ...)")
    p.add_argument(
        "--since", help="from this time: ISO 8601 with a zone (2026-11-27T10:00:00Z) or an age (2h, 7d)"
    )
    p.add_argument("--until", help="up to this time (as --since)")
    p.add_argument("--limit", type=int, default=100, help="the newest this many (default 100)")
    p.add_argument("-f", "--follow", action="store_true", help="then print new records as they are written")
    p.add_argument(
        "-n", "--count", type=int, default=0, help="with --follow: exit after this many new records"
    )
    p.add_argument("--json", action="store_true", help="one JSON record per line")
    add_common(p)


@dataclass(frozen=True)
class Command:
    """One `antler` command: its parser, and what runs it (`module:function`, imported when it runs;
    a coroutine function unless `blocking`)."""

    name: str
    add_parser: Callable[[SubParsers], None]
    target: str
    blocking: bool = False

    def run(self, args: argparse.Namespace) -> int:
        module, _, function = self.target.partition(":")
        call: Callable[[argparse.Namespace], Any] = getattr(importlib.import_module(module), function)
        return int(call(args) if self.blocking else run_main(call(args)))


# In the order `antler --help` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("up", _up, "antler.up:up"),
    Command("run", _run, "antler.run:main", blocking=True),
    Command("send", _send, "antler.send:send"),
    Command("tail", _tail, "antler.tail:tail"),
    Command("top", _top, "antler.top:top"),
    Command("schema", _schema, "antler.schema:schema", blocking=True),
    Command("bench", _bench, "antler.bench:bench"),
    Command("creds", _creds, "antler.creds:creds", blocking=True),
    Command("provision", _provision, "antler.creds:provision"),
    Command("dlq", _dlq, "antler.dlq:dlq"),
    Command("sandbox", _sandbox, "antler.sandbox:sandbox"),
    Command("user", _user, "antler.user:user"),
    Command("schedule", _schedule, "antler.schedule:schedule"),
    Command("audit", _audit, "antler.audit:audit"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="antler", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = next(c for c in COMMANDS if c.name == args.command)
    return exit_code(f"antler {args.command}", lambda: command.run(args))
