"""The environment handed to processes Antler starts for itself (stdio MCP servers, say)."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASS|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_CONNECTION_STRING = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)


def scrubbed_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without anything that looks like a secret or a connection string.

    Not for sandboxed commands (they get `sandbox.hygiene.command_env`, an allowlist):
    for processes of our own that need the ordinary settings (PATH, HOME, locale).
    """
    env = dict(os.environ if base is None else base)
    return {
        name: value
        for name, value in env.items()
        if not _SECRET_NAME.search(name)
        and not _CONNECTION_STRING.search(value)
        and not name.startswith("ANTLER_")
    }
