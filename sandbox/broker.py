"""The sandbox broker: a NATS micro service running commands and file operations per user and thread.

Endpoints (`<prefix>.sandbox.<name>`): exec, start_job (a background command, `sandbox.jobs`),
read_file, write_file, list_dir, str_replace, glob, grep. It also follows `<prefix>.events.thread.deleted`
(`sandbox.cleanup`): a deleted thread's directories go. Commands and greps
share the broker fairly between users (`sandbox.fairness`) and stay within
the thread's disk quota (`sandbox.quota`). Every failure is a reply with an
error code and a message the model can act on; nothing a caller sends can
crash the service.
Any number of brokers serve one queue group; `$SRV` discovery lists them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

from access.egress import egress_policy
from bus import Bus, component_ready
from bus.layout import SKILLS, USER_DATA
from bus.messages import (
    ExecReply,
    ExecRequest,
    GlobReply,
    GlobRequest,
    GrepMatch,
    GrepReply,
    GrepRequest,
    JobReply,
    JobStartRequest,
    ListDirReply,
    ListDirRequest,
    ReadFileReply,
    ReadFileRequest,
    SandboxRequest,
    StrReplaceReply,
    StrReplaceRequest,
    WriteFileReply,
    WriteFileRequest,
)
from bus.metrics import SANDBOX_COMMAND_DURATION, SANDBOX_COMMANDS, SANDBOX_REFUSALS
from bus.service import Endpoint, Running, start_service
from bus.tasks import until_cancelled
from config import AppConfig
from sandbox import files, quota, search
from sandbox.cleanup import ThreadCleaner
from sandbox.errors import InvalidRequest, NotAllowed, TooLarge
from sandbox.fairness import UserSlots
from sandbox.hygiene import check_command
from sandbox.jobs import Jobs
from sandbox.objects import FileSync
from sandbox.paths import ThreadFS
from sandbox.providers import Outcome, Provider, make_provider
from sandbox.toolbox import Toolbox
from skills import SkillsFollower

log = logging.getLogger(__name__)
audit = logging.getLogger("sandbox.audit")


class Broker:
    def __init__(self, bus: Bus, config: AppConfig, provider: Provider, sync: FileSync) -> None:
        self.bus = bus
        self.config = config.sandbox
        # A request from an older runner carries no policy: the deployment's, for the default role.
        self.default_egress = egress_policy(config, None)
        self.root = Path(config.sandbox.data_dir or Path(config.bus.data_dir) / "sandbox").resolve()
        # This machine's copy of the skills (`skills.view`), kept to the published catalog.
        self.skills_follower = SkillsFollower(bus, config, publish_if_missing=False)
        self.skills = self.skills_follower.view.root
        self.provider = provider
        self.sync = sync
        self.locks = files.PathLocks()
        self.slots = UserSlots(config.sandbox.max_commands_per_user, config.sandbox.max_waiting_per_user)
        self.jobs = Jobs(bus, self.run_command, config.sandbox.background_timeout_seconds)

    def fs(self, request: SandboxRequest) -> ThreadFS:
        skills = self.skills if self.skills.is_dir() else None
        fs = ThreadFS(self.root, request.user_id, request.thread_id, skills)
        fs.ensure(self.provider.owner)
        return fs

    # ------------------------------------------------------------------ endpoints

    async def exec(self, req: ExecRequest) -> ExecReply:
        limit = self.config.command_timeout_seconds
        timeout = min(req.timeout_seconds, limit) if req.timeout_seconds else limit
        self._refusal(req, time.monotonic())  # refused at once, before waiting for a slot
        async with self.slots.hold(req.user_id):
            return await self.run_command(req, timeout)

    async def start_job(self, req: JobStartRequest) -> JobReply:
        """A background command (`sandbox.jobs`): started, answered at once."""
        self._refusal(req, time.monotonic())
        return await self.jobs.start(req)

    def _refusal(self, req: ExecRequest, started: float) -> list[str]:
        """The command's warnings, or the refusal it gets (raised)."""
        reason, warnings = check_command(req.command)
        if reason is not None:
            self._audit(req, exit_code=None, started=started, refused=reason)
            if reason.startswith("refused"):
                raise NotAllowed(f"{reason}. Use a safer command.")
            raise InvalidRequest(reason)
        return warnings

    async def run_command(self, req: ExecRequest, timeout: float) -> ExecReply:
        """Run a command within `timeout` (the caller holds the user's slot if it should)."""
        started = time.monotonic()
        warnings = self._refusal(req, started)
        await self._skills_current(req.command)
        fs = self.fs(req)
        await self.sync.pull_uploads(fs)
        try:
            outcome = await self._run_within_quota(fs, req, timeout)
        except TooLarge as exc:
            self._audit(req, exit_code=None, started=started, refused=exc.message, refusal="too_large")
            raise
        await self.sync.push_outputs(fs)
        used = await asyncio.to_thread(quota.usage, fs)
        warnings = [*warnings, *self._limit_warnings(outcome), *outcome.notes]
        if used > self._quota_bytes:
            warnings.append(quota.over_quota_message(used, self.config.max_thread_mb))
        self._audit(req, exit_code=outcome.exit_code, started=started, timed_out=outcome.timed_out)
        return ExecReply(
            exit_code=outcome.exit_code,
            output=outcome.output,
            timed_out=outcome.timed_out,
            timeout_seconds=timeout,
            truncated_chars=outcome.truncated_chars,
            warnings=warnings,
        )

    def _limit_warnings(self, outcome: Outcome) -> list[str]:
        """What the model should know when a limit ended the command."""
        c = self.config
        if outcome.out_of_memory:
            return [
                f"killed: the command's processes together passed its memory limit ({c.memory_mb} MB), "
                "so all of them were stopped; use less memory at once (smaller pieces, fewer processes)"
            ]
        code = outcome.exit_code
        if code == 128 + signal.SIGXCPU:
            return [f"killed: a process used up its CPU time limit ({c.cpu_seconds}s)"]
        if code == 128 + signal.SIGXFSZ:
            size = c.max_file_size_mb
            return [f"killed: a file passed the size limit ({size} MB), or the thread is over its quota"]
        if code == 128 + signal.SIGKILL:
            return ["killed by SIGKILL (not by one of the sandbox's limits)"]
        return []

    @property
    def _quota_bytes(self) -> int:
        return int(self.config.max_thread_mb * 1e6)

    async def _run_within_quota(self, fs: ThreadFS, req: ExecRequest, timeout: float) -> Outcome:
        """Run the command under the run's egress policy, stopping it if it takes the thread over its
        disk quota (checked every `quota.CHECK_SECONDS`); a thread already over it runs commands that
        cannot grow files."""
        at_start = await asyncio.to_thread(quota.usage, fs)
        run = asyncio.create_task(
            self.provider.run(
                fs,
                req.command,
                timeout,
                grow_files=at_start <= self._quota_bytes,
                egress=req.egress or self.default_egress,
                run_id=req.run_id,
            )
        )
        try:
            while True:
                done, _ = await asyncio.wait({run}, timeout=quota.CHECK_SECONDS)
                if done:
                    return run.result()
                used = await asyncio.to_thread(quota.usage, fs)
                if used > self._quota_bytes and used > at_start:
                    log.warning(
                        "thread %s of %s: a command passed the disk quota; stopped", fs.thread_id, fs.user_id
                    )
                    message = quota.over_quota_message(used, self.config.max_thread_mb)
                    raise TooLarge(f"the command was stopped: {message}")
        finally:
            if not run.done():
                run.cancel()
                await asyncio.gather(run, return_exceptions=True)

    async def _check_quota(self, fs: ThreadFS, adding: int) -> None:
        used = await asyncio.to_thread(quota.usage, fs)
        if used + adding > self._quota_bytes:
            raise TooLarge(quota.over_quota_message(used + adding, self.config.max_thread_mb))

    async def _skills_current(self, text: str | None) -> None:
        """A command or path under /mnt/skills: take the catalog's newest version first (a runner may
        have offered a skill installed a moment ago, before this broker's watch brought it)."""
        if text and SKILLS in text:
            await self.skills_follower.refresh()

    async def read_file(self, req: ReadFileRequest) -> ReadFileReply:
        await self._skills_current(req.path)
        fs = self.fs(req)
        if req.path.startswith(f"{USER_DATA}/uploads"):
            await self.sync.pull_uploads(fs)
        if req.encoding == "base64":
            data, content_type = await asyncio.to_thread(files.read_binary, fs, req.path)
            return ReadFileReply(content=data, content_type=content_type)
        content, total, cut = await asyncio.to_thread(
            files.read_file, fs, req.path, req.start_line, req.end_line, self.config
        )
        return ReadFileReply(content=content, total_lines=total, truncated_chars=cut)

    async def write_file(self, req: WriteFileRequest) -> WriteFileReply:
        fs = self.fs(req)
        key = fs.locate(req.path, write=True).key
        await self._check_quota(fs, len(req.content.encode("utf-8")))
        async with self.locks.hold(key):
            written = await asyncio.to_thread(
                files.write_file, fs, req.path, req.content, req.append, self.config, self.provider.owner
            )
        if req.path.startswith(f"{USER_DATA}/outputs/"):
            await self.sync.push_outputs(fs)
        return WriteFileReply(path=req.path, bytes_written=written)

    async def list_dir(self, req: ListDirRequest) -> ListDirReply:
        await self._skills_current(req.path)
        fs = self.fs(req)
        await self.sync.pull_uploads(fs)
        tree, entries = await asyncio.to_thread(files.list_dir, fs, req.path, req.max_depth)
        return ListDirReply(tree=tree, entries=entries)

    async def str_replace(self, req: StrReplaceRequest) -> StrReplaceReply:
        fs = self.fs(req)
        key = fs.locate(req.path, write=True).key
        await self._check_quota(fs, max(len(req.new_str) - len(req.old_str), 0))
        async with self.locks.hold(key):
            count = await asyncio.to_thread(
                files.str_replace,
                fs,
                req.path,
                req.old_str,
                req.new_str,
                req.replace_all,
                self.config,
                self.provider.owner,
            )
        if req.path.startswith(f"{USER_DATA}/outputs/"):
            await self.sync.push_outputs(fs)
        return StrReplaceReply(replacements=count)

    async def glob(self, req: GlobRequest) -> GlobReply:
        await self._skills_current(req.path)
        fs = self.fs(req)
        await self.sync.pull_uploads(fs)
        found, truncated = await asyncio.to_thread(files.glob, fs, req.pattern, req.path)
        return GlobReply(paths=found, truncated=truncated)

    async def grep(self, req: GrepRequest) -> GrepReply:
        await self._skills_current(req.path)
        fs = self.fs(req)
        async with self.slots.hold(req.user_id):
            await self.sync.pull_uploads(fs)
            found, truncated = await search.grep(
                self.provider,
                fs,
                self.config,
                pattern=req.pattern,
                path=req.path,
                file_glob=req.glob,
                ignore_case=req.ignore_case,
                max_matches=req.max_matches,
            )
        return GrepReply(
            matches=[GrepMatch(path=p, line=n, text=t) for p, n, t in found], truncated=truncated
        )

    def _audit(
        self,
        req: ExecRequest,
        *,
        exit_code: int | None,
        started: float,
        timed_out: bool = False,
        refused: str | None = None,
        refusal: str | None = None,  # the refusal's kind for metrics (default: from `refused`)
    ) -> None:
        took = time.monotonic() - started
        if refused is not None:
            SANDBOX_REFUSALS.labels(
                refusal or ("policy" if refused.startswith("refused") else "invalid")
            ).inc()
        else:
            SANDBOX_COMMANDS.labels("timed_out" if timed_out else "ok" if exit_code == 0 else "failed").inc()
            SANDBOX_COMMAND_DURATION.observe(took)
        audit.info(
            json.dumps(
                {
                    "event": "exec",
                    "background": isinstance(req, JobStartRequest),
                    "user": req.user_id,
                    "thread": req.thread_id,
                    "run": req.run_id,
                    "command": req.command[:2000],
                    "exit_code": exit_code,
                    "timed_out": timed_out,
                    "refused": refused,
                    "duration_ms": round(took * 1000, 1),
                    "provider": self.provider.name,
                },
                ensure_ascii=False,
            )
        )


async def serve_broker(bus: Bus, config: AppConfig) -> tuple[Running, ThreadCleaner, Broker]:
    """The service, answering; started after this broker caught up on deleted threads."""
    provider = await asyncio.to_thread(make_provider, config.sandbox, Toolbox.from_config(config))
    broker = Broker(bus, config, provider, FileSync(await bus.files(), provider.owner))
    cleaner = ThreadCleaner(bus, broker.root, broker.sync.forget)
    await cleaner.start()
    await broker.skills_follower.start()
    await broker.jobs.start_listening()
    endpoints: list[Endpoint[Any, Any]] = [
        Endpoint("exec", ExecRequest, ExecReply, broker.exec),
        Endpoint("start_job", JobStartRequest, JobReply, broker.start_job),
        Endpoint("read_file", ReadFileRequest, ReadFileReply, broker.read_file),
        Endpoint("write_file", WriteFileRequest, WriteFileReply, broker.write_file),
        Endpoint("list_dir", ListDirRequest, ListDirReply, broker.list_dir),
        Endpoint("str_replace", StrReplaceRequest, StrReplaceReply, broker.str_replace),
        Endpoint("glob", GlobRequest, GlobReply, broker.glob),
        Endpoint("grep", GrepRequest, GrepReply, broker.grep),
    ]
    running = await start_service(
        bus,
        "sandbox",
        endpoints,
        description=f"Sandboxed commands and files per thread ({provider.name} provider)",
        metadata={
            "provider": provider.name,
            "isolated": str(provider.isolated).lower(),
            "command_limits": provider.limits.mechanism,
        },
    )
    log.info("sandbox broker serving with the %s provider (files under %s)", provider.name, broker.root)
    return running, cleaner, broker


async def run(bus: Bus, config: AppConfig) -> None:
    """The sandbox broker component: serve until cancelled, then stop the service."""
    service, cleaner, broker = await serve_broker(bus, config)
    component_ready()
    try:
        await until_cancelled()
    finally:
        await service.stop()
        await broker.jobs.stop()
        await cleaner.stop()
        await broker.skills_follower.close()
        broker.provider.limits.stop()
