"""The sandbox: isolation, limits, and the toolbox its commands find."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from config._env import Section

DEFAULT_TOOLBOX_PACKAGES = [
    "pandas",
    "numpy",
    "matplotlib",
    "openpyxl",
    "python-pptx",
    "python-docx",
    "pypdf",
]


class ToolboxConfig(Section):
    """The Python environment (and the host's Node.js) sandboxed commands get: `sandbox.toolbox`."""

    enabled: bool = Field(True, description="Mount the toolbox into every sandbox (when it is installed).")
    path: str | None = Field(
        None,
        description="Where it is installed; default $ANTLER_TOOLBOX_PATH, else the installation's "
        "(<sys.prefix>/share/antler/toolbox, or the user's cache when that is not writable), shared "
        "by every data dir.",
    )
    python_packages: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TOOLBOX_PACKAGES),
        description="pip requirements installed into it (`antler sandbox install`, `antler up`).",
    )
    node: bool = Field(True, description="Offer the host's Node.js in the sandbox when it has one.")


class SandboxConfig(Section):
    provider: Literal["auto", "bwrap", "local"] = Field(
        "auto", description="auto = bwrap when installed, else local (not isolated)."
    )
    data_dir: str | None = Field(
        None, description="Per-user, per-thread working copies; default <bus.data_dir>/sandbox."
    )
    allow_network: bool = Field(
        False,
        description="Commands reach the host's network (bwrap; local always can); `egress`, when set, "
        "decides instead.",
    )
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="Variables every sandboxed command gets (DeerFlow's sandbox.environment); a value "
        "$NAME is read from the broker's environment, and one whose variable is unset is left out. "
        "Commands, and so the model, can read them: put here only what the agent may see (a media "
        "skill's endpoint and key).",
    )
    command_timeout_seconds: float = Field(120.0, gt=0)
    background_timeout_seconds: float = Field(
        3600.0,
        gt=0,
        description="A command the agent runs in the background (bash's run_in_background) is killed "
        "after this long.",
    )
    max_background_commands: int = Field(
        2,
        ge=0,
        description="Background commands one thread may have running at once; more are refused with "
        "an error. 0 turns background commands off.",
    )
    grep_timeout_seconds: float = Field(
        30.0, gt=0, description="The grep tool's deadline: a pattern still matching then is killed."
    )
    max_output_chars: int = Field(20_000, gt=0)
    max_read_chars: int = Field(50_000, gt=0)
    max_write_bytes: int = Field(10 * 1024 * 1024, gt=0)
    cpu_seconds: int = Field(120, gt=0)
    cpu_cores: float = Field(
        1.0, gt=0, description="CPU one command's processes may use together (cgroup hosts only)."
    )
    memory_mb: int = Field(1024, gt=0, description="Memory one command's processes may hold together.")
    command_limits: Literal["auto", "cgroup2", "cgroup1", "watch"] = Field(
        "auto",
        description=(
            "What holds a command's processes to memory_mb together: auto = the first this host offers of "
            "cgroup2 (a delegated v2 hierarchy), cgroup1 (the v1 controllers), watch (the broker sums the "
            "command's process tree and kills it past the limit); naming one starts the search there."
        ),
    )
    max_processes: int = Field(256, gt=0)
    max_file_size_mb: int = Field(100, gt=0)
    max_thread_mb: float = Field(
        1024, gt=0, description="Disk one thread's files may take (workspace, outputs, uploads, /tmp)."
    )
    max_commands_per_user: int = Field(
        8, gt=0, description="Commands (and greps) of one user a broker runs at once; more wait."
    )
    max_waiting_per_user: int = Field(
        8, ge=0, description="Commands of one user waiting for a slot; more are refused (busy)."
    )
    toolbox: ToolboxConfig = Field(default_factory=ToolboxConfig)
