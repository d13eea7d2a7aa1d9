"""Virtual paths: the only paths the agent sees, mapped to one user's one thread on the host.

    /mnt/user-data/workspace  -> <root>/users/<user>/threads/<thread>/user-data/workspace  (read-write)
    /mnt/user-data/outputs    -> .../outputs                                              (read-write)
    /mnt/user-data/uploads    -> .../uploads                                              (read-only)
    /mnt/skills               -> the skills directory                                     (read-only)

Everything else is refused, and so is `..`. This module only maps names: it
never looks at the disk, because a sandboxed command can change what a name is
between a look and a use. Opening what a `Location` names, safely, is the job of
`sandbox.fdpath`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bus.layout import SKILLS, USER_DATA
from bus.subjects import safe_token
from sandbox.errors import InvalidRequest, NotAllowed

WRITABLE = ("workspace", "outputs")


@dataclass(frozen=True)
class Mount:
    virtual: str
    host: Path
    writable: bool


@dataclass(frozen=True)
class Location:
    """A virtual path split into its mount and the names below the mount's root."""

    mount: Mount
    parts: tuple[str, ...]

    @property
    def virtual(self) -> str:
        return str(PurePosixPath(self.mount.virtual, *self.parts))

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else PurePosixPath(self.mount.virtual).name

    @property
    def key(self) -> str:
        """Names the file for locks; nothing may open it (that would follow symlinks)."""
        return str(self.mount.host.joinpath(*self.parts))

    def child(self, *names: str) -> Location:
        return Location(self.mount, (*self.parts, *names))


class ThreadFS:
    """One thread's view of the file system."""

    def __init__(self, root: Path, user_id: str, thread_id: str, skills: Path | None = None) -> None:
        if not user_id or not thread_id:
            raise InvalidRequest("user_id and thread_id are required")
        self.user_id = user_id
        self.thread_id = thread_id
        self.base = root / "users" / safe_token(user_id) / "threads" / safe_token(thread_id) / "user-data"
        self.mounts = [
            Mount(f"{USER_DATA}/workspace", self.base / "workspace", True),
            Mount(f"{USER_DATA}/outputs", self.base / "outputs", True),
            Mount(f"{USER_DATA}/uploads", self.base / "uploads", False),
        ]
        if skills is not None:
            self.mounts.append(Mount(SKILLS, skills, False))
        # The parent of the three, so /mnt/user-data can be listed and searched; nothing is written there.
        self.mounts.append(Mount(USER_DATA, self.base, False))

    def ensure(self, owner: tuple[int, int] | None = None) -> None:
        """Create the thread's directories (owned by the sandbox user when we run as root)."""
        for mount in self.mounts[:3]:
            if not mount.host.is_dir():
                mount.host.mkdir(parents=True, exist_ok=True)
                if owner is not None:
                    os.chown(mount.host, *owner)

    @property
    def workspace(self) -> Path:
        return self.mounts[0].host

    @property
    def outputs(self) -> Path:
        return self.mounts[1].host

    @property
    def uploads(self) -> Path:
        return self.mounts[2].host

    def locate(self, virtual: str, *, write: bool = False) -> Location:
        """Which mount a virtual path is under, and the names below that mount's root.

        Raises:
            NotAllowed: outside the mounts, `..`, or a write to a read-only mount.
            InvalidRequest: not an absolute path, or contains NUL.
        """
        if not virtual or "\x00" in virtual:
            raise InvalidRequest("a path is required (and must not contain NUL bytes)")
        if not virtual.startswith("/"):
            raise InvalidRequest(
                f"{virtual!r} is not absolute; use paths under {USER_DATA} (e.g. {USER_DATA}/workspace)"
            )
        pure = PurePosixPath(virtual)
        if ".." in pure.parts:
            raise NotAllowed(f"{virtual}: '..' is not allowed in paths")
        for mount in self.mounts:
            if pure == PurePosixPath(mount.virtual) or PurePosixPath(mount.virtual) in pure.parents:
                if write and not mount.writable:
                    raise NotAllowed(
                        f"{mount.virtual} is read-only; "
                        f"write under {USER_DATA}/workspace or {USER_DATA}/outputs"
                    )
                return Location(mount, pure.relative_to(mount.virtual).parts)
        raise NotAllowed(
            f"{virtual} is outside the sandbox; "
            f"only {USER_DATA}/{{workspace,uploads,outputs}} and {SKILLS} exist"
        )

    def translate_command(self, command: str) -> str:
        """Virtual paths in a shell command replaced by host paths (the unisolated local provider)."""
        pattern = re.compile(
            "|".join(re.escape(m.virtual) for m in sorted(self.mounts, key=lambda m: -len(m.virtual)))
        )
        hosts = {m.virtual: str(m.host) for m in self.mounts}
        return pattern.sub(lambda match: hosts[match.group(0)], command)

    def untranslate(self, text: str) -> str:
        """Host paths in command output replaced by the virtual ones the agent knows."""
        for mount in sorted(self.mounts, key=lambda m: -len(str(m.host))):
            text = text.replace(str(mount.host), mount.virtual)
        return text
