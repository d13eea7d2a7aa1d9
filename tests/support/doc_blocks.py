"""Fenced blocks of the docs and running them as a reader would: what `tests/test_docs.py` checks,
and what tests that walk the README (tests/e2e/test_first_hour.py) run."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "shell"}
VENV = Path(sys.prefix)  # the virtualenv running these tests: the reader's `.venv`
PASSWORD = "correct horse battery staple"
SNIPPET_TIMEOUT = 90.0

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
MARKER = re.compile(r"^<!--\s*(?P<kind>no-test|needs-antler)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced block: where it is, its language, its text and how it is marked."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None  # "no-test", "needs-antler" or None
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each with the marker on the line before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, start = opening["fence"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        previous = lines[start - 1].strip() if start > 0 else ""
        marker = MARKER.match(previous)
        blocks.append(
            Block(
                path=path,
                line=start + 1,
                lang=opening["info"].lower(),
                code="\n".join(body) + "\n",
                marker=marker["kind"] if marker else None,
                reason=(marker["reason"] or "") if marker else "",
            )
        )
        i += 1
    return blocks


# --- running a block -----------------------------------------------------------------------------


def reader_env(workdir: Path) -> dict[str, str]:
    """The environment of a reader who activated `.venv` in `workdir`: nothing of ours leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTLER_", "PYTEST_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(workdir if (workdir / "pyproject.toml").exists() else REPO)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.pop("PYTHONWARNINGS", None)
    return env


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a block with `bash -e` on a pseudo-terminal (so prompts are answered); (exit code, output).

    The terminal is the block's standard input but not its controlling terminal, so `getpass`
    reads the answers we type from standard input, one line each.
    """
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["bash", "-e", "-c", block.code],
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + SNIPPET_TIMEOUT
    answered_at = 0  # how much of the output had been read when we last typed a password
    try:
        while True:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(
                    f"{block.id} still running after {SNIPPET_TIMEOUT:g}s:\n{output.decode()}"
                )
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            output += chunk
            if re.search(rb"(Password|Again): ?$", output[answered_at:]):
                answered_at = len(output)
                os.write(master, PASSWORD.encode() + b"\n")
    finally:
        try:
            code = proc.wait(timeout=0 if time.monotonic() >= deadline else 30)
        except subprocess.TimeoutExpired:
            code = -signal.SIGKILL
        # Whatever the block left running (its own process group, started above) goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)
    return code, output.decode(errors="replace").replace("\r\n", "\n")
