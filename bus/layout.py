"""The file layout the agent sees, the same in every component: one thread's user data and the skills.

    /mnt/user-data/workspace   the thread's working directory (read-write)
    /mnt/user-data/outputs     deliverables; presented files must be here (read-write)
    /mnt/user-data/uploads     the user's uploads (read-only)
    /mnt/skills                the skills directory (read-only)

The sandbox maps these to host directories (sandbox/paths.py); everyone else
only names them.
"""

from __future__ import annotations

USER_DATA = "/mnt/user-data"
WORKSPACE = f"{USER_DATA}/workspace"
OUTPUTS = f"{USER_DATA}/outputs"
UPLOADS = f"{USER_DATA}/uploads"
SKILLS = "/mnt/skills"


def upload_path(name: str) -> str:
    """Where an uploaded file named `name` is, for the agent."""
    return f"{UPLOADS}/{name}"


def output_relative(path: str) -> str | None:
    """The part of an outputs path below /mnt/user-data/outputs (None: not an outputs path)."""
    prefix = OUTPUTS + "/"
    if not path.startswith(prefix) or len(path) == len(prefix):
        return None
    return path[len(prefix) :]
