"""`SandboxClient`: what the agent's tools call. Typed requests out, typed errors back.

client = SandboxClient(bus, user_id="ana", thread_id="t1")
result = await client.exec("ls /mnt/user-data/workspace")
"""

from __future__ import annotations

from typing import TypeVar

from bus import Bus
from bus.layout import USER_DATA
from bus.messages import (
    EgressPolicy,
    ExecReply,
    ExecRequest,
    GlobReply,
    GlobRequest,
    GrepReply,
    GrepRequest,
    JobReply,
    JobStartRequest,
    ListDirReply,
    ListDirRequest,
    ReadFileReply,
    ReadFileRequest,
    Reply,
    SandboxRequest,
    StrReplaceReply,
    StrReplaceRequest,
    WriteFileReply,
    WriteFileRequest,
)
from bus.service import call
from sandbox.errors import from_code

R = TypeVar("R", bound=Reply)

# Time the bus adds on top of a command's own limit before the client gives up.
_GRACE = 10.0
# The longest a command may run when the caller leaves its limit to the broker.
MAX_COMMAND_SECONDS = 900.0


class SandboxClient:
    def __init__(self, bus: Bus, user_id: str, thread_id: str, timeout: float = 30.0) -> None:
        self.bus = bus
        self.user_id = user_id
        self.thread_id = thread_id
        self.timeout = timeout

    async def _call(
        self, endpoint: str, request: SandboxRequest, reply: type[R], timeout: float | None = None
    ) -> R:
        return await call(
            self.bus,
            "sandbox",
            endpoint,
            request,
            reply,
            timeout=timeout or self.timeout,
            errors=from_code,
            unavailable="no sandbox broker is running; start it (antler up / antler run sandbox)",
        )

    def _base(self) -> dict[str, str]:
        return {"user_id": self.user_id, "thread_id": self.thread_id}

    async def exec(
        self,
        command: str,
        timeout: float | None = None,
        *,
        egress: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> ExecReply:
        """Run a shell command under the run's `egress` policy (None: the deployment's default); a
        command that times out comes back with `timed_out` and its output so far."""
        request = ExecRequest(
            **self._base(), command=command, timeout_seconds=timeout, egress=egress, run_id=run_id
        )
        wait = (timeout or MAX_COMMAND_SECONDS) + _GRACE
        return await self._call("exec", request, ExecReply, timeout=wait)

    async def start_job(
        self,
        command: str,
        job_id: str,
        timeout: float | None = None,
        *,
        egress: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> JobReply:
        """Start a background command (`sandbox.jobs`) and answer at once; its end is asked for on
        `<prefix>.sandbox.job.<job_id>`. Refusals (the hygiene checks) raise as `exec`'s do."""
        request = JobStartRequest(
            **self._base(),
            command=command,
            timeout_seconds=timeout,
            egress=egress,
            run_id=run_id,
            job_id=job_id,
        )
        return await self._call("start_job", request, JobReply)

    async def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ReadFileReply:
        request = ReadFileRequest(**self._base(), path=path, start_line=start_line, end_line=end_line)
        return await self._call("read_file", request, ReadFileReply)

    async def read_binary(self, path: str) -> ReadFileReply:
        """The whole file base64-encoded in `content`, with its `content_type`."""
        request = ReadFileRequest(**self._base(), path=path, encoding="base64")
        return await self._call("read_file", request, ReadFileReply)

    async def write_file(self, path: str, content: str, append: bool = False) -> WriteFileReply:
        request = WriteFileRequest(**self._base(), path=path, content=content, append=append)
        return await self._call("write_file", request, WriteFileReply)

    async def list_dir(self, path: str = USER_DATA, max_depth: int = 2) -> ListDirReply:
        return await self._call(
            "list_dir", ListDirRequest(**self._base(), path=path, max_depth=max_depth), ListDirReply
        )

    async def str_replace(
        self, path: str, old_str: str, new_str: str, replace_all: bool = False
    ) -> StrReplaceReply:
        request = StrReplaceRequest(
            **self._base(), path=path, old_str=old_str, new_str=new_str, replace_all=replace_all
        )
        return await self._call("str_replace", request, StrReplaceReply)

    async def glob(self, pattern: str, path: str = USER_DATA) -> GlobReply:
        return await self._call("glob", GlobRequest(**self._base(), pattern=pattern, path=path), GlobReply)

    async def grep(
        self,
        pattern: str,
        path: str = USER_DATA,
        glob: str | None = None,
        ignore_case: bool = False,
        max_matches: int = 200,
    ) -> GrepReply:
        request = GrepRequest(
            **self._base(),
            pattern=pattern,
            path=path,
            glob=glob,
            ignore_case=ignore_case,
            max_matches=max_matches,
        )
        return await self._call("grep", request, GrepReply)
