"""What may run, with what environment, and how much of its output comes back."""

from __future__ import annotations

import os
import re

MAX_COMMAND_CHARS = 10_000


# Refused outright: destructive or escaping patterns with no legitimate use in a sandbox.
BLOCKED: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"\brm\s+(-[a-zA-Z]*\s+)*(-[a-zA-Z]*[rf][a-zA-Z]*\s+)+(/|/\*|~|\$HOME)(\s|$)"),
        "deleting the root or home directory",
    ),
    (
        re.compile(r"\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da)?sh\b"),
        "piping a download straight into a shell",
    ),
    (re.compile(r":\s*\(\s*\)\s*\{.*:\s*\|\s*:.*\}"), "a fork bomb"),
    (re.compile(r"/dev/(tcp|udp)/"), "raw network sockets through /dev/tcp or /dev/udp"),
    (re.compile(r"\bmkfs(\.\w+)?\b|\bdd\b[^\n]*\bof=/dev/"), "writing to a block device"),
    (re.compile(r"\b(shutdown|reboot|halt|poweroff)\b"), "powering the machine off"),
]

# Allowed, with a warning in the result.
RISKY: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bpip3?\s+install\b|\bnpm\s+(i|install)\b|\bapt(-get)?\s+install\b"), "installs packages"),
    (re.compile(r"\bsudo\b"), "asks for root (sudo)"),
    (re.compile(r"\bchmod\s+(-R\s+)?0?777\b"), "makes files writable by everyone (chmod 777)"),
]


def check_command(command: str) -> tuple[str | None, list[str]]:
    """`(refusal reason or None, warnings)` for a shell command."""
    if not command or not command.strip():
        return "the command is empty", []
    if len(command) > MAX_COMMAND_CHARS:
        return f"the command is {len(command)} characters long; the limit is {MAX_COMMAND_CHARS}", []
    if "\x00" in command:
        return "the command contains NUL bytes", []
    for pattern, what in BLOCKED:
        if pattern.search(command):
            return f"refused: this looks like {what}", []
    warnings = [f"warning: this command {what}" for pattern, what in RISKY if pattern.search(command)]
    return None, warnings


# The only variables a sandboxed command gets from the broker's environment: locale,
# time zone and terminal settings, and only with plain values. Everything else it
# sees is set by the provider (PATH, HOME, TMPDIR, ...).
PASSED_TO_COMMANDS = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_TIME", "TZ", "TERM")
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_.,:@/+-]{0,64}$")


def command_env(fixed: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command: an allowlist, never the broker's other variables.

    Args:
        fixed: what the provider sets itself (PATH, HOME, ...); wins over `base`.
        base: the broker's environment (`os.environ` by default), read for `PASSED_TO_COMMANDS` only.
    """
    source = os.environ if base is None else base
    env = {
        name: source[name]
        for name in PASSED_TO_COMMANDS
        if name in source and _PLAIN_VALUE.match(source[name])
    }
    env.setdefault("LANG", "C.UTF-8")  # Python and friends default to UTF-8 only with a UTF-8 locale
    env.update(fixed)
    return env


def truncate(text: str, limit: int, what: str = "output") -> tuple[str, int]:
    """Keep the start and the end (errors tend to be last); say how much was cut."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    head = text[: limit // 2]
    tail = text[len(text) - (limit - len(head)) :]
    return f"{head}\n[... {what} truncated: {cut} characters cut ...]\n{tail}", cut
