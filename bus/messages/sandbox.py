"""The sandbox broker's requests and replies (exec, files, glob, grep)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from bus.layout import USER_DATA
from bus.messages.base import (
    Envelope,
    Reply,
)


class SandboxRequest(Envelope):
    user_id: str = "default"
    thread_id: str


class EgressPolicy(BaseModel):
    """Where a run's network access may go (`access.egress.egress_policy` decides it per role)."""

    mode: Literal["none", "allowlist", "all"] = "none"
    allow: list[str] = Field(
        default_factory=list, description="allowlist: these domains and their subdomains."
    )
    hosts: dict[str, str] = Field(
        default_factory=dict, description="Names the operator pinned to an address (config `egress.hosts`)."
    )
    source: str = Field(
        "egress", description="Where it was configured, for messages (`access.roles.x.egress`)."
    )
    binds_web: bool = Field(True, description="web_fetch obeys it too (False only while `egress` is unset).")


class ExecRequest(SandboxRequest):
    """Run a shell command in a thread's sandbox: `<prefix>.sandbox.exec` (request/reply)."""

    command: str
    timeout_seconds: float | None = None
    run_id: str | None = Field(None, description="The run asking, named in the log of refused connections.")
    egress: EgressPolicy | None = Field(
        None, description="The run's egress policy; unset = the deployment's for the default role."
    )


class ExecReply(Reply):
    """A sandbox command's output, exit code, and whether it was stopped at its time limit."""

    exit_code: int | None = None
    output: str = ""
    timed_out: bool = Field(False, description="The command outlived timeout_seconds and was killed.")
    timeout_seconds: float | None = Field(None, description="The time limit the command ran under.")
    truncated_chars: int = 0
    warnings: list[str] = Field(default_factory=list)


class JobStartRequest(ExecRequest):
    """Start a background command (`agents.subagents.background_commands`) and answer at once:
    `<prefix>.sandbox.start_job`. The broker that takes it runs it under
    `sandbox.background_timeout_seconds` and answers `JobControl` on `<prefix>.sandbox.job.<job_id>`
    (every broker listens; only the one running it answers). Starting a job it already knows is
    no second start."""

    job_id: str = Field(description="A safe NATS token: the job's subject.")


class JobControl(Envelope):
    """Asked of whichever broker runs a background command, on `<prefix>.sandbox.job.<job_id>`:
    `wait` up to `wait_seconds` for its end (answered then, or with `running`), `kill` it with all
    its processes (answered at once). No answer: no broker runs or remembers it."""

    action: Literal["wait", "kill"] = "wait"
    wait_seconds: float = Field(15.0, ge=0, le=60)


class JobReply(Reply):
    """A background command's state: `running`, or `ended` with the command's `result` (its
    `ExecReply`; `killed` when a `kill` ended it)."""

    job_id: str = ""
    state: Literal["running", "ended"] = "running"
    result: ExecReply | None = None
    killed: bool = False


class ReadFileRequest(SandboxRequest):
    """Read a file (or a range of lines) of a thread's sandbox: `<prefix>.sandbox.read_file`."""

    path: str
    start_line: int | None = Field(None, ge=1)
    end_line: int | None = Field(None, ge=1)
    encoding: Literal["text", "base64"] = Field("text", description="base64: the whole file, for images.")


class ReadFileReply(Reply):
    """A sandbox file's text (cut at `sandbox.max_read_chars`, saying so)."""

    content: str = ""
    total_lines: int = 0
    truncated_chars: int = 0
    content_type: str | None = None


class WriteFileRequest(SandboxRequest):
    """Write or append to a file in a thread's sandbox: `<prefix>.sandbox.write_file`."""

    path: str
    content: str
    append: bool = False


class WriteFileReply(Reply):
    """What a sandbox write did (bytes written)."""

    path: str = ""
    bytes_written: int = 0


class ListDirRequest(SandboxRequest):
    """List a sandbox directory as a tree: `<prefix>.sandbox.list_dir`."""

    path: str = USER_DATA
    max_depth: int = Field(2, ge=1, le=5)


class ListDirReply(Reply):
    """A sandbox directory tree, as text."""

    tree: str = ""
    entries: list[str] = Field(default_factory=list)


class StrReplaceRequest(SandboxRequest):
    """Replace a unique string in a sandbox file: `<prefix>.sandbox.str_replace`."""

    path: str
    old_str: str
    new_str: str
    replace_all: bool = False


class StrReplaceReply(Reply):
    """What a sandbox replacement did."""

    replacements: int = 0


class GlobRequest(SandboxRequest):
    """Find sandbox files by glob pattern: `<prefix>.sandbox.glob`."""

    pattern: str
    path: str = USER_DATA


class GlobReply(Reply):
    """The sandbox paths a glob found."""

    paths: list[str] = Field(default_factory=list)
    truncated: bool = False


class GrepRequest(SandboxRequest):
    """Search sandbox files for a regular expression: `<prefix>.sandbox.grep`."""

    pattern: str
    path: str = USER_DATA
    glob: str | None = None
    ignore_case: bool = False
    max_matches: int = Field(200, ge=1, le=5000)


class GrepMatch(BaseModel):
    path: str
    line: int
    text: str


class GrepReply(Reply):
    """The matching lines a sandbox grep found."""

    matches: list[GrepMatch] = Field(default_factory=list)
    truncated: bool = False
