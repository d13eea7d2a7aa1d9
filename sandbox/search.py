"""The grep tool: a user's regular expression, matched inside the sandbox under a hard deadline.

Python's `re` backtracks, so a pattern like `(a+)+$` can take longer than the
universe on a 35-character line, and it holds the GIL while it does: matched in
the broker, one grep stalled every request of the process (issue #27). The
broker only checks the path here (through `sandbox.fdpath`, as every file
operation does, so errors read the same); the pattern is compiled and matched by
`sandbox.grep_child` run as a sandboxed command: the thread's own mounts, the
command's limits, and `sandbox.grep_timeout_seconds`, after which it is killed
and the model is told why. Matching stays Python's `re` (same syntax as always).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import shlex
import stat
from pathlib import Path

from config import SandboxConfig
from sandbox import fdpath
from sandbox.errors import InvalidRequest, SandboxError, Timeout, Unavailable
from sandbox.paths import Location, ThreadFS
from sandbox.providers import Provider

log = logging.getLogger(__name__)

MAX_PATTERN_CHARS = 10_000
_SOURCE = (Path(__file__).parent / "grep_child.py").read_text(encoding="utf-8")
# A match line: path, number and 500 characters, JSON-escaped (control characters take 6 bytes each).
_BYTES_PER_MATCH = 500 * 6 + 1024


def _check(location: Location) -> None:
    """The path exists below its mount without a symlink, and is a directory or a regular file."""
    with fdpath.opened(location) as (_, info):
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            raise InvalidRequest(f"{location.virtual} is not a regular file")


async def grep(
    provider: Provider,
    fs: ThreadFS,
    config: SandboxConfig,
    *,
    pattern: str,
    path: str,
    file_glob: str | None,
    ignore_case: bool,
    max_matches: int,
) -> tuple[list[tuple[str, int, str]], bool]:
    """`([(virtual path, line number, text)], truncated)` of the lines matching `pattern`.

    Raises:
        InvalidRequest: a bad pattern or path. NotFound / NotAllowed: as `fdpath` says.
        Timeout: the search ran past `config.grep_timeout_seconds` (and was killed).
        Unavailable: the sandbox has no Python to search with.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidRequest(f"the pattern is {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
    location = fs.locate(path)
    await asyncio.to_thread(_check, location)
    python = provider.python
    if python is None:
        raise Unavailable("grep needs python3 inside the sandbox (in /usr/bin or /usr/local/bin); use bash")
    args = {
        "root": provider.root_of(location.mount),
        "parts": list(location.parts),
        "pattern": pattern,
        "ignore_case": ignore_case,
        "glob": file_glob,
        "max": max_matches,
    }
    # base64: the local provider rewrites virtual paths in a command line, the pattern's included.
    encoded = base64.b64encode(json.dumps(args).encode()).decode("ascii")
    command = f"exec {shlex.quote(python)} -I -S -c {shlex.quote(_SOURCE)} {encoded}"
    timeout = config.grep_timeout_seconds
    limit = max_matches * _BYTES_PER_MATCH + 4096
    outcome = await provider.run(fs, command, timeout, output_limit=2 * limit)
    if outcome.timed_out:
        log.info("grep of thread %s stopped after %gs: pattern %r", fs.thread_id, timeout, pattern[:200])
        raise Timeout(
            f"grep stopped after {timeout:g}s: the pattern took too long to match (nested repetition "
            f"such as (a+)+ can take exponential time). Simplify the pattern or search a narrower path"
        )
    if outcome.out_of_memory:
        raise SandboxError(
            f"grep was stopped: the search passed the sandbox's memory limit ({config.memory_mb} MB); "
            "search a narrower path or fewer files"
        )
    if outcome.exit_code == 2:
        raise InvalidRequest(outcome.output.strip() or "not a valid regular expression")
    lines = outcome.output.splitlines()
    try:
        end = json.loads(lines[-1]) if lines else None
    except ValueError:
        end = None
    if outcome.exit_code != 0 or not isinstance(end, dict) or "truncated" not in end:
        tail = outcome.output.strip()[-500:]
        raise SandboxError(
            f"grep failed (exit code {outcome.exit_code}); it may be over the sandbox's memory limit: {tail}"
        )
    matches: list[tuple[str, int, str]] = []
    for line in lines[:-1]:
        found = json.loads(line)
        where = location.child(*found["p"].split("/")).virtual if found["p"] else location.virtual
        matches.append((where, int(found["n"]), str(found["t"])))
    return matches, bool(end["truncated"])
