"""This machine's copy of the skills: the folder every component lists and the sandbox mounts.

    <data_dir>/skills/
        public/<name>/    copied from the code's skills (`skills.path`/public) when they changed
        custom/<name>/    the current version of each custom skill, unpacked from the object store
        .view.json        what is here: {"public": fingerprint, "custom": {name: version}}
    <data_dir>/skills.lock   held while the copy changes (the processes of one machine share it)

Nothing here is the truth: the object store and the published catalog are (`skills.store`,
`skills.catalog`). A deleted folder is made again on the next sync; a custom skill the catalog no
longer names is removed. Each skill is replaced whole (unpacked beside it, then swapped in), so a
reader sees the old version or the new one, never a mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from skills import store

log = logging.getLogger(__name__)

STATE = ".view.json"


class SkillsView:
    """The local copy under `<data_dir>/skills`, kept equal to what the catalog says."""

    def __init__(self, data_dir: str | Path, skills_path: str | Path) -> None:
        self.root = Path(data_dir).resolve() / "skills"
        self.public_source = Path(skills_path).resolve() / "public"
        self._lock_path = self.root.parent / "skills.lock"
        self._busy = asyncio.Lock()

    async def sync(self, bus: Any, wanted: dict[str, str]) -> None:
        """Make the copy hold the code's public skills and exactly the custom skills `wanted`
        (name -> version), fetching from the object store only what this machine lacks. A version
        that is gone from the store (deleted meanwhile) is logged and left out."""
        async with self._busy:
            missing = await asyncio.to_thread(self._outdated, wanted)
            archives: dict[str, bytes] = {}
            for name in missing:
                try:
                    archives[name] = await store.fetch_archive(bus, name, wanted[name])
                except Exception as exc:
                    log.warning("skill %s version %s could not be fetched: %s", name, wanted[name], exc)
            await asyncio.to_thread(self._apply, wanted, archives)

    # ------------------------------------------------------------------ blocking parts

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads((self.root / STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"public": None, "custom": {}}
        return data if isinstance(data, dict) else {"public": None, "custom": {}}

    def _has(self, state: dict[str, Any], name: str, version: str) -> bool:
        return (state.get("custom") or {}).get(name) == version and (
            self.root / "custom" / name / "SKILL.md"
        ).is_file()

    def _outdated(self, wanted: dict[str, str]) -> list[str]:
        state = self._state()
        return [name for name, version in wanted.items() if not self._has(state, name, version)]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _apply(self, wanted: dict[str, str], archives: dict[str, bytes]) -> None:
        with self._locked():
            custom_root = self.root / "custom"
            custom_root.mkdir(parents=True, exist_ok=True)
            os.chmod(self.root, 0o755)
            os.chmod(custom_root, 0o755)
            state = self._state()  # again: another process of this machine may have done the work
            printed = _fingerprint(self.public_source)
            if state.get("public") != printed or not (self.root / "public").is_dir():
                self._replace(self.root / "public", lambda staging: _copy_public(self.public_source, staging))
                state["public"] = printed
            have: dict[str, str] = dict(state.get("custom") or {})
            for name, data in archives.items():
                if self._has(state, name, wanted[name]):
                    continue
                try:
                    self._replace(custom_root / name, lambda staging, data=data: _unpack(data, staging))
                except (OSError, ValueError) as exc:
                    log.warning("skill %s could not be unpacked: %s", name, exc)
                    continue
                have[name] = wanted[name]
            for folder in custom_root.iterdir():
                if folder.name not in wanted and not folder.name.startswith("."):
                    if folder.is_dir():
                        shutil.rmtree(folder, ignore_errors=True)
                    else:
                        folder.unlink()
                    log.info("skill %s removed from this machine's copy", folder.name)
            state["custom"] = {name: version for name, version in have.items() if name in wanted}
            _write_atomically(self.root / STATE, json.dumps(state, sort_keys=True).encode())
            # What a process killed mid-swap left behind (every swap happens under this lock).
            for folder in (self.root, custom_root):
                for left in [*folder.glob(".new-*"), *folder.glob(".old-*")]:
                    shutil.rmtree(left, ignore_errors=True)

    def _replace(self, target: Path, fill: Any) -> None:
        """Build the new `target` beside it, then swap it in (a reader never sees it half made)."""
        staging = Path(tempfile.mkdtemp(prefix=".new-", dir=target.parent))
        try:
            os.chmod(staging, 0o755)
            fill(staging)
            old = None
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=".old-", dir=target.parent))
                os.rename(target, old / "x")
            os.rename(staging, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _fingerprint(folder: Path) -> str:
    """Names, sizes and times of every file under `folder`: changes when the code's skills do."""
    digest = hashlib.sha256()
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                stat = path.stat()
                digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _copy_public(source: Path, staging: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


def _unpack(archive: bytes, staging: Path) -> None:
    """Write a stored version's files under `staging`, refusing any path that would leave it (the
    archive was checked when installed; anyone with the object store's rights could have put one)."""
    for name, data in store.unpack(archive).items():
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts or "\\" in name:
            raise ValueError(f"the stored archive holds a path leaving its folder: {name}")
        destination = staging.joinpath(*parts)
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        destination.write_bytes(data)
        os.chmod(destination, 0o755 if data.startswith(b"#!") else 0o644)
    for folder in staging.rglob("*"):
        if folder.is_dir():
            os.chmod(folder, 0o755)


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
