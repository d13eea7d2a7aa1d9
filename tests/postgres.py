"""A real PostgreSQL server for tests: Debian's binaries, a temp cluster, a free loopback port.

`make install` installs Debian's `postgresql` package. PostgreSQL refuses to run as
root, so as root the cluster belongs to (and the server runs as) the `postgres`
user the package creates, else `nobody`. The server is tuned for throwaway data
(no fsync); each test takes its own database from `fresh_database`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

READY_LINE = b"database system is ready to accept connections"
SUPERUSER = "antler"


class PostgresNotInstalled(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "PostgreSQL's server binaries (initdb, postgres) were not found on PATH or under "
            "/usr/lib/postgresql/*/bin; run `make install` (it installs Debian's postgresql package)"
        )


def find_bindir() -> Path:
    """The directory holding `initdb` and `postgres`, newest installed version first."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise PostgresNotInstalled()
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unprivileged_user() -> pwd.struct_passwd | None:
    """Who runs the server: nobody special when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root, and there is no 'postgres' or 'nobody' user to run PostgreSQL as")


class PostgresServer:
    """One throwaway cluster: `start()`, `url`, `fresh_database()`, `stop()` (plain blocking calls:
    it serves a whole test session, outside any test's event loop)."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.port = 0
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._user = _unprivileged_user()

    @property
    def url(self) -> str:
        """The superuser's URL of the `postgres` database."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def _as_user(self) -> dict[str, Any]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60.0) -> None:
        # Not under pytest's tmp dir: that one is private to root, and the server must reach its files.
        self._dir = Path(tempfile.mkdtemp(prefix="antler-pg-"))
        data = self._dir / "data"
        if self._user is not None:
            os.chown(self._dir, self._user.pw_uid, self._user.pw_gid)
        initdb = [str(self.bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust"]
        init = subprocess.run(
            [*initdb, "--no-sync", "--encoding=UTF8", "--locale=C"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self._dir,
            timeout=timeout,
            check=False,
            **self._as_user(),
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}):\n{init.stdout.decode(errors='replace')}")
        self.port = _free_port()
        settings = ["fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=300"]
        self._proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1"]
            + ["-k", str(self._dir)]
            + [arg for setting in settings for arg in ("-c", setting)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self._dir,
            **self._as_user(),
        )
        ready = threading.Event()
        log: list[bytes] = []

        def read_log(stream: Any) -> None:  # to the end, so a full pipe never blocks the server
            for line in stream:
                if not ready.is_set():
                    log.append(line)
                    if READY_LINE in line:
                        ready.set()
            ready.set()

        threading.Thread(target=read_log, args=(self._proc.stderr,), daemon=True).start()
        if not ready.wait(timeout) or self._proc.poll() is not None:
            self.stop()
            raise RuntimeError("PostgreSQL did not start:\n" + b"".join(log).decode(errors="replace"))

    def fresh_database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
