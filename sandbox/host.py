"""What this host lets the sandbox do: bwrap's namespaces, a user namespace per command."""

from __future__ import annotations

import logging
import shutil

log = logging.getLogger("sandbox.providers")

SANDBOX_UID = 65534  # nobody: commands never run as root
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# Programs and libraries, read-only. Not /opt: what is installed there is the host's, not the sandbox's.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def own_process_count() -> str | None:
    """`unshare`, when it can give a command run as the sandbox uid a user namespace of its own.

    The process limit (RLIMIT_NPROC) counts a uid's processes per user namespace: without one of
    its own, every command running as the sandbox uid at the same time shares one count, and one
    thread's fork bomb would stop every other thread's commands from starting processes.
    """
    import subprocess

    unshare = shutil.which("unshare")
    if unshare is not None:
        try:
            result = subprocess.run(
                [unshare, "--user", f"--map-user={SANDBOX_UID}", f"--map-group={SANDBOX_UID}", "--", "true"],
                capture_output=True,
                timeout=10,
                check=False,
                user=SANDBOX_UID,
                group=SANDBOX_UID,
                extra_groups=[],
            )
        except (OSError, subprocess.SubprocessError):
            result = None
        if result is not None and result.returncode == 0:
            return unshare
    log.warning(
        "sandbox: no user namespace per command here (unshare from util-linux >= 2.38 and unprivileged "
        "user namespaces are needed); commands running at the same time share one process limit "
        "(sandbox.max_processes)"
    )
    return None


def bwrap_works() -> bool:
    """bwrap is installed and can create its namespaces here."""
    if shutil.which("bwrap") is None:
        return False
    import subprocess

    try:
        result = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--dev", "/dev", "/bin/true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0
