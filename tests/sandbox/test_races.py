"""Sandboxed code racing the broker's file operations never reaches a host file (issue #10).

A command run through the sandbox, as the agent would run bash, flips names in
the workspace as fast as it can between something benign inside and a symlink to
the host: a regular file <-> a link to a secret file, a regular file <-> a link
to a file that does not exist yet, a real directory <-> a link to a host
directory. Meanwhile the test sends read/write/list/glob/grep/str_replace
requests for a bounded number of iterations. Whatever the interleaving, no reply
may carry the secret or name a host path, and nothing outside the thread's
directories may be created or changed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bus import Bus
from bus.files import OUTPUTS, list_objects, thread_prefix
from config import AppConfig
from sandbox import Conflict, InvalidRequest, NotAllowed, NotFound, SandboxClient, SandboxError

pytestmark = pytest.mark.asyncio

WS = "/mnt/user-data/workspace"
OUT = "/mnt/user-data/outputs"
ITERATIONS = 300
TIME_BUDGET = 4.0  # seconds of racing per test, whichever of the two ends first

# Runs inside the sandbox. Every loop flips three names; `f` and `w` are replaced
# atomically (rename over them), `d` goes real dir -> gone -> link out -> gone.
FLIPPER = """
import os, shutil, sys
secret_file, host_dir, host_target, where = sys.argv[1:5]
os.chdir(where)
BENIGN = "gateway_token: benign\\n"
for name, text in (("benign_f.txt", BENIGN), ("benign_w.txt", "benign\\n")):
    with open(name, "w") as out:
        out.write(text)
os.makedirs("d", exist_ok=True)
with open("d/config.yaml", "w") as out:
    out.write(BENIGN)
os.link("benign_f.txt", "f")
os.link("benign_w.txt", "w")

def put(make, name):  # a write may make `d` again while it is gone: clear it and retry
    while True:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(name, ignore_errors=True)
        try:
            return make()
        except OSError:
            continue

open("ready", "w").close()
flips = 0
while not os.path.exists("stop"):
    os.symlink(secret_file, ".tmp_f"); os.rename(".tmp_f", "f")
    os.symlink(host_target, ".tmp_w"); os.rename(".tmp_w", "w")
    os.rename("d", ".d_real"); put(lambda: os.symlink(host_dir, "d"), "d")
    os.link("benign_f.txt", ".tmp_f"); os.rename(".tmp_f", "f")
    os.link("benign_w.txt", ".tmp_w"); os.rename(".tmp_w", "w")
    put(lambda: os.rename(".d_real", "d"), "d")
    flips += 1
print("flips", flips)
"""

# What a reply may fail with while names come and go under it (never `internal`).
EXPECTED_ERRORS = (NotFound, NotAllowed, InvalidRequest, Conflict)


@dataclass
class Host:
    """Host files the sandbox must never reach."""

    secret: str
    secret_file: Path
    directory: Path  # holds the secret file and a marker; `d` is flipped to point here
    target: Path  # does not exist; `w` is flipped to point here
    before: dict[str, tuple[int, int]] = field(default_factory=dict)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(self.directory.parent.rglob("*"))
            if p.is_file()
        }

    def assert_untouched(self) -> None:
        assert not self.target.exists(), "a write went through a symlink and created a host file"
        assert self.snapshot() == self.before, "a host file was created or changed"
        assert self.secret in self.secret_file.read_text()


@dataclass
class Race:
    host: Host
    client: SandboxClient
    errors: list[SandboxError] = field(default_factory=list)
    successes: int = 0

    def check(self, *texts: str) -> None:
        """Nothing a reply says may carry the secret, a host path or a host file's name."""
        for text in texts:
            assert self.host.secret not in text, "host file content reached the agent"
            assert str(self.host.directory) not in text, "a host path reached the agent"
            assert "host-only-marker" not in text, "a host directory's listing reached the agent"

    async def attempt(self, operation: Awaitable[list[str]]) -> None:
        try:
            texts = await operation
        except SandboxError as exc:
            self.errors.append(exc)
            self.check(exc.message)
            return
        self.successes += 1
        self.check(*texts)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    secret = f"SECRET-{uuid.uuid4().hex}"
    directory = tmp_path / "host" / "etc-antler"
    directory.mkdir(parents=True)
    secret_file = directory / "config.yaml"
    secret_file.write_text(f"gateway_token: {secret}\n")
    (directory / "host-only-marker.yaml").write_text(f"gateway_token: {secret}\n")
    found = Host(secret, secret_file, directory, tmp_path / "host" / "created-by-sandbox.txt")
    found.before = found.snapshot()
    return found


@contextlib.asynccontextmanager
async def flipping(client: SandboxClient, host: Host, where: str = WS) -> AsyncIterator[Race]:
    """The flipper running in the sandbox (in `where`) for the duration of the block, then checked."""
    await client.write_file(f"{WS}/flip.py", FLIPPER)
    command = f"python3 {WS}/flip.py {host.secret_file} {host.directory} {host.target} {where}"
    flipper = asyncio.create_task(client.exec(command, timeout=30))
    deadline = time.monotonic() + 10
    while True:  # the flipper says it has started by creating `ready`
        with contextlib.suppress(NotFound):
            await client.read_file(f"{where}/ready")
            break
        assert not flipper.done(), (await flipper).output
        assert time.monotonic() < deadline, "the flipper did not start"
        await asyncio.sleep(0.02)
    race = Race(host, client)
    try:
        yield race
    finally:
        await client.write_file(f"{where}/stop", "")
        result = await asyncio.wait_for(flipper, 30)
    assert result.exit_code == 0, result.output
    assert int(result.output.split()[-1]) > 0, "the flipper never flipped"
    host.assert_untouched()
    unexpected = [f"{type(e).__name__}: {e}" for e in race.errors if not isinstance(e, EXPECTED_ERRORS)]
    assert not unexpected, "every failure is one the model can act on"


async def race_for_a_while(race: Race, operations: list[Callable[[], Awaitable[list[str]]]]) -> None:
    deadline = time.monotonic() + TIME_BUDGET
    for i in range(ITERATIONS):
        await race.attempt(operations[i % len(operations)]())
        if time.monotonic() > deadline:
            break


def _read(client: SandboxClient, path: str) -> Callable[[], Awaitable[list[str]]]:
    async def operation() -> list[str]:
        return [(await client.read_file(path)).content]

    return operation


def _read_binary(client: SandboxClient, path: str) -> Callable[[], Awaitable[list[str]]]:
    async def operation() -> list[str]:
        return [base64.b64decode((await client.read_binary(path)).content).decode(errors="replace")]

    return operation


async def test_reads_never_return_a_host_file(client: SandboxClient, broker: AppConfig, host: Host) -> None:
    async with flipping(client, host) as race:
        await race_for_a_while(
            race,
            [
                _read(client, f"{WS}/f"),
                _read(client, f"{WS}/d/config.yaml"),
                _read_binary(client, f"{WS}/f"),
                _read_binary(client, f"{WS}/d/config.yaml"),
            ],
        )
    assert race.successes > 0, "reads of the benign files should sometimes succeed"


async def test_writes_never_create_or_change_a_host_file(
    client: SandboxClient, broker: AppConfig, host: Host
) -> None:
    def write(path: str, append: bool = False) -> Callable[[], Awaitable[list[str]]]:
        async def operation() -> list[str]:
            await client.write_file(path, "written by the agent\n", append=append)
            return []

        return operation

    async with flipping(client, host) as race:
        await race_for_a_while(
            race,
            [
                write(f"{WS}/w"),
                write(f"{WS}/d/config.yaml"),
                write(f"{WS}/d/new.txt"),
                write(f"{WS}/w", append=True),
                write(f"{WS}/d/sub/deeper.txt"),
            ],
        )
    assert race.successes > 0
    assert not (host.directory / "new.txt").exists()
    assert not (host.directory / "sub").exists()


async def test_listing_never_shows_a_host_directory(
    client: SandboxClient, broker: AppConfig, host: Host
) -> None:
    async def ls(path: str) -> list[str]:
        listing = await client.list_dir(path, max_depth=3)
        return [listing.tree, *listing.entries]

    async with flipping(client, host) as race:
        await race_for_a_while(race, [lambda: ls(WS), lambda: ls(f"{WS}/d"), lambda: ls("/mnt/user-data")])
    assert race.successes > 0


async def test_glob_never_finds_host_files(client: SandboxClient, broker: AppConfig, host: Host) -> None:
    def find(pattern: str, path: str = WS) -> Callable[[], Awaitable[list[str]]]:
        async def operation() -> list[str]:
            return (await client.glob(pattern, path)).paths

        return operation

    async with flipping(client, host) as race:
        await race_for_a_while(race, [find("**/*.yaml"), find("*/*.yaml"), find("*", f"{WS}/d"), find("**")])
    assert race.successes > 0


async def test_grep_never_searches_a_host_file(client: SandboxClient, broker: AppConfig, host: Host) -> None:
    def search(path: str) -> Callable[[], Awaitable[list[str]]]:
        async def operation() -> list[str]:
            found = await client.grep("gateway_token", path)
            return [f"{m.path}:{m.text}" for m in found.matches]

        return operation

    async with flipping(client, host) as race:
        await race_for_a_while(race, [search(WS), search(f"{WS}/d"), search(f"{WS}/f")])
    assert race.successes > 0


async def test_str_replace_never_reads_or_edits_a_host_file(
    client: SandboxClient, broker: AppConfig, host: Host
) -> None:
    def replace(path: str, old: str, new: str) -> Callable[[], Awaitable[list[str]]]:
        async def operation() -> list[str]:
            count = (await client.str_replace(path, old, new, replace_all=True)).replacements
            # Only the host file holds the secret: finding it means the host file was read.
            assert old != host.secret, "str_replace found text that only the host file holds"
            return [f"{count} replacements"]

        return operation

    async with flipping(client, host) as race:
        await race_for_a_while(
            race,
            [
                replace(f"{WS}/f", host.secret, "x"),
                replace(f"{WS}/d/config.yaml", host.secret, "x"),
                replace(f"{WS}/f", "gateway_token", "gateway_token"),
                replace(f"{WS}/d/config.yaml", "gateway_token", "gateway_token"),
            ],
        )
    assert race.successes > 0


async def test_published_outputs_never_carry_a_host_file(
    bus: Bus, client: SandboxClient, broker: AppConfig, host: Host
) -> None:
    async def publish() -> list[str]:  # every write under outputs publishes what changed there
        await client.write_file(f"{OUT}/note.txt", "a note\n", append=True)
        return []

    store = await bus.files()
    async with flipping(client, host, where=OUT) as race:
        await race_for_a_while(race, [publish])
        assert race.successes > 0
        published = await list_objects(store, thread_prefix(OUTPUTS, "ana", "t1"))
        assert {"note.txt", "benign_f.txt"} <= {info.name.rsplit("/", 1)[-1] for info in published}
        for info in published:
            race.check(info.name, ((await store.get(info.name)).data or b"").decode(errors="replace"))
