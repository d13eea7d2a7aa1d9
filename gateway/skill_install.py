"""Where a `.skill` archive to install comes from, and which names it may not take: shared by the
gateway's `POST /api/skills/install` and `antler.Client.install_skill` (no FastAPI here).

An archive may be one the agent wrote into a thread's outputs (`/mnt/user-data/outputs/x.skill`,
read from the object store as the caller's); a custom skill may not take a built-in skill's name.
"""

from __future__ import annotations

from pathlib import Path

from bus import Bus
from bus.files import output_key
from bus.layout import OUTPUTS, output_relative
from skills import load_skills

MAX_SKILL_ARCHIVE = 20 * 1024 * 1024


class NotAnOutput(ValueError):
    """The path is not a file under the thread's outputs."""


class NoSuchOutput(LookupError):
    """The thread has no file at that path."""


def is_public(skills_path: str, name: str) -> bool:
    """A built-in skill has this name (a custom skill may not shadow one)."""
    return (Path(skills_path) / "public" / name).exists() or any(
        s.name.lower() == name.lower() for s in load_skills(skills_path) if s.category == "public"
    )


async def thread_output(bus: Bus, user_id: str, thread_id: str, path: str) -> bytes:
    """The bytes of a file under the thread's outputs (`/mnt/user-data/outputs/...`; the thread is
    the caller's: check that first).

    Raises:
        NotAnOutput: the path is not under /mnt/user-data/outputs (or leaves it).
        NoSuchOutput: no such file.
    """
    relative = output_relative(path)
    if relative is None or ".." in relative.split("/"):
        raise NotAnOutput(f"{path} is not a file under {OUTPUTS}")
    try:
        found = await (await bus.files()).get(output_key(user_id, thread_id, relative))
    except Exception:  # not in the object store
        raise NoSuchOutput(f"no file {path} in thread {thread_id}") from None
    if found.info.deleted:
        raise NoSuchOutput(f"no file {path} in thread {thread_id}")
    return found.data or b""
