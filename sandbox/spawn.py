"""Starting a sandboxed command so that nothing of the broker's process reaches it but its own pipes.

The broker runs on uvloop, whose `subprocess_exec` ignores `close_fds`
(uvloop's own TODO): every descriptor the broker held without close-on-exec
crossed into each command, among them `antler up`'s log, which its children
inherit (issue #47). So commands are started with the standard library's
`subprocess.Popen`, which closes every descriptor but 0, 1, 2 and the
`pass_fds` in the child before it execs (close_range), whoever opened them
and however; its output is read on the event loop through the pipe, and its
exit is awaited on a pidfd, so no thread waits per command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Any


@dataclass
class Started:
    """A running command: its process (a session leader) and its output (stdout and stderr together)."""

    process: subprocess.Popen[bytes]
    output: asyncio.StreamReader
    _transport: asyncio.BaseTransport

    @property
    def pid(self) -> int:
        return self.process.pid

    async def wait(self) -> int:
        """Its exit status (negative: the signal that killed it), once it has exited and is reaped."""
        if self.process.returncode is not None:
            return self.process.returncode
        try:
            pidfd = os.pidfd_open(self.process.pid)
        except OSError:  # a kernel before 5.3: a thread waits
            return await asyncio.to_thread(self.process.wait)
        loop = asyncio.get_running_loop()
        exited = loop.create_future()
        loop.add_reader(pidfd, lambda: None if exited.done() else exited.set_result(None))
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self.process.wait()  # readable pidfd: it has exited, this reaps it at once

    def kill(self) -> None:
        """SIGKILL its process group (the command's, unless a process left it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        """Let go of the output pipe; reap the process in the background if it is still running."""
        self._transport.close()
        if self.process.returncode is None:
            self.kill()
            asyncio.get_running_loop().run_in_executor(None, self.process.wait)


async def start(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    pass_fds: tuple[int, ...] = (),
    as_user: tuple[int, int] | None = None,
) -> Started:
    """Start `argv` in a session of its own, stdin on /dev/null, stdout and stderr on one pipe, and no
    other descriptor than `pass_fds` (which keep their numbers)."""
    user: dict[str, Any] = {}
    if as_user is not None:
        user = {"user": as_user[0], "group": as_user[1], "extra_groups": []}
    process = subprocess.Popen(  # noqa: ASYNC220 - forks and execs at once; the wait is a pidfd's
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        close_fds=True,
        pass_fds=pass_fds,
        start_new_session=True,
        **user,
    )
    assert process.stdout is not None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), process.stdout
        )
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return Started(process, reader, transport)
