"""The tests' nats-server runs with the per-component users `antler up` generates, one set per stack.

Each test (or module-wide stack) has its own prefix; `SecuredServer.open_stack(prefix, data_dir)`
generates that prefix's users exactly as `antler up` does (`bus.permissions.generate_users`: one
user per component plus the stack's admin), adds them to the running server (a config reload), and
writes `<data_dir>/nats-users.json` and `<data_dir>/nats.url` where `antler up` writes them, so a
component started in the test or as a child process (`antler run`, `antler send`) logs in as it
would in production. Only the test's own driver (the `bus` fixture, a test's probes) connects as
the stack's admin, as the CLI does.

The tripwire: every `Publish Violation` / `Subscription Violation` the server logs for a stack's
users is a defect of our permissions table (a component touched a subject its rights do not
cover, so a feature fails on `antler up` defaults). `StackUsers.violations()` reads them from the
server's log; the fixtures fail the test at teardown unless it is marked
`@pytest.mark.permission_violations(reason)` (a test that provokes a refusal on purpose).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from bus import EmbeddedServer
from bus.permissions import ADMIN, USERS_FILE, NatsUser, generate_users, save_users, server_block
from bus.subjects import Subjects

# nats-server's log line for a refused publish or subscription, e.g.
# [ERR] 127.0.0.1:35968 - cid:6 - "v2.16.0:python3" - "$G/user:t1-runner" - Publish Violation - Subject "x"
VIOLATION = re.compile(
    rb'"[^"/]*/user:(?P<user>[^"]+)" - (?P<kind>Publish|Subscription) Violation'
    rb' - Subject "(?P<subject>[^"]*)"'
)


_NO_RIGHTS: dict[str, object] = {"publish": {"allow": ["_none"]}, "subscribe": {"allow": ["_none"]}}


@dataclass
class StackUsers:
    """One stack's users on the shared test server."""

    server: SecuredServer
    prefix: str
    users: list[NatsUser]
    log_offset: int  # where the server's log stood when the stack's users were added
    closed: bool = field(default=False)

    @property
    def admin(self) -> NatsUser:
        return next(u for u in self.users if u.component == ADMIN)

    def user(self, component: str) -> NatsUser:
        return next(u for u in self.users if u.component == component)

    def violations(self) -> list[str]:
        """`<user> <kind> <subject>` for each refusal the server logged for this stack's users."""
        names = {u.user for u in self.users}
        found = []
        for match in VIOLATION.finditer(self.server.log_since(self.log_offset)):
            user = match.group("user").decode()
            if user in names:
                found.append(f"{user}: {match.group('kind').decode()} {match.group('subject').decode()}")
        return found

    def close(self) -> None:
        """Delete the stack's streams, then remove its users (their connections, if any are left, are
        closed by the server)."""
        if not self.closed:
            self.closed = True
            drop_streams(self.server.url, self.admin, Subjects(self.prefix))
            self.server.remove(self.prefix)


class SecuredServer:
    """The session's nats-server with an authorization block of every open stack's users."""

    def __init__(self, server: EmbeddedServer) -> None:
        self.server = server
        # Always one user, so authorization is on from the start: a connection without credentials
        # is refused whether or not a stack is open (it would be in production).
        nobody = NatsUser("nobody", "test-nobody", secrets.token_urlsafe(16), _NO_RIGHTS)
        self._stacks: dict[str, list[NatsUser]] = {"": [nobody]}

    @classmethod
    def authorization_at_start(cls) -> str:
        """The block to start the server with (before any stack): nobody may do anything."""
        return server_block([NatsUser("nobody", "test-nobody", secrets.token_urlsafe(16), _NO_RIGHTS)])

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log_path(self) -> Path:
        return self.server.log_path

    def log_since(self, offset: int) -> bytes:
        return self.server.log_since(offset)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def authorization(self) -> str:
        return server_block([u for stack in self._stacks.values() for u in stack])

    def open_stack(self, prefix: str, data_dir: Path | None = None) -> StackUsers:
        """Add `prefix`'s users (as `antler up` generates them) and, with `data_dir`, save them there."""
        users = generate_users(Subjects(prefix))
        self._stacks[prefix] = users
        offset = self.log_size()
        self.server.reload(self.authorization())
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            save_users(data_dir / USERS_FILE, users)
            (data_dir / "nats.url").write_text(self.url + "\n", encoding="utf-8")
        return StackUsers(self, prefix, users, offset)

    def remove(self, prefix: str) -> None:
        if self._stacks.pop(prefix, None) is not None:
            self.server.reload(self.authorization())


def drop_streams(url: str, admin: NatsUser, subjects: Subjects) -> None:
    """Delete a stack's streams, buckets and object store from the worker's server. Streams with a
    size limit reserve it (the memory stream 256 MB) out of JetStream's store, which nats-server
    sizes from the disk's free space at start: kept for a whole worker's tests, they used it up
    ("insufficient storage resources available") on machines with 68 GB free and in CI.

    Run on a thread of its own: a stack closes from sync teardown code, inside or outside a loop."""
    import nats

    mine = (subjects.stream(""), f"KV_{subjects.bucket('')}", f"OBJ_{subjects.bucket('')}")

    async def drop() -> None:
        nc = await nats.connect(
            url,
            user=admin.user,
            password=admin.password,
            connect_timeout=5,
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )
        try:
            js = nc.jetstream(timeout=10)
            for info in await js.streams_info():
                if info.config.name and info.config.name.startswith(mine):
                    with contextlib.suppress(Exception):
                        await js.delete_stream(info.config.name)
        finally:
            await nc.close()

    def run() -> None:
        with contextlib.suppress(Exception):  # a test that took the server down has nothing left here
            asyncio.run(drop())

    thread = threading.Thread(target=run, name="drop-streams")
    thread.start()
    thread.join(30)


def logged_violations(directory: Path) -> list[str]:
    """`<user>: <kind> <subject>` for every refusal in the nats-server logs under `directory` (an
    `antler up` data dir, or an external server's): a stack started as a child process is judged so."""
    found = []
    for log in sorted(directory.rglob("nats-server.log*")):
        for match in VIOLATION.finditer(log.read_bytes()):
            user, kind, subject = (match.group(g).decode() for g in ("user", "kind", "subject"))
            found.append(f"{user}: {kind} {subject}")
    return found
