"""What a non-admin sees of the MCP servers' settings: every secret they may hold shown as `***`.

Admins write these settings and see them whole. Anyone else may see which servers exist and how they
start (to understand what the agent can do), but no secret, wherever the admin put it:

- `env`, `headers`: every value;
- `oauth` and any other mapping: values under a secret-looking key (`client_secret`, `token`, ...);
- `args`: `--token=VALUE`, the argument after `--api-key` (any secret-looking flag), `NAME=VALUE`
  with a secret-looking NAME (`-e GITHUB_TOKEN=...`), a `Bearer ...` argument, strings shaped like
  well-known tokens (`ghp_...`, `sk-...`, `xoxb-...`), and URLs as below;
- URLs (the `url` field, arguments, error texts in `status`): the userinfo (`user:pass@`) and the
  values of secret-looking query parameters (`?token=...`).

`$NAME` references are kept: they name a secret held elsewhere, they are not one.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

HIDDEN = "***"

_SECRET_PARTS = {
    "token", "secret", "password", "passwd", "pwd", "pass", "key", "apikey", "auth",
    "authorization", "credential", "credentials", "cookie", "bearer", "pat", "session", "sig",
    "signature", "jwt",
}  # fmt: skip
_TOKEN_SHAPES = re.compile(
    r"^(gh[pousr]_|github_pat_|glpat-|sk-|sk_|pk_live_|rk_live_|xox[abposr]-|AKIA|ya29\.|eyJ)"
)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)
_ALWAYS_SECRET = {"env", "headers"}


def secret_name(name: str) -> bool:
    """Whether a key, flag or parameter name says its value is a secret (`--api-key`, `X_TOKEN`)."""
    lowered = name.lower().lstrip("-")
    if lowered.endswith(("url", "uri", "endpoint", "type")):  # `token_url` names where, not what
        return False
    if any(word in lowered for word in ("token", "secret", "password", "apikey", "api_key", "api-key")):
        return True
    return any(part in _SECRET_PARTS for part in re.split(r"[-_.\s]+", lowered) if part)


def _reference(value: str) -> bool:
    return value.startswith("$")


def redact_url(url: str) -> str:
    """The URL without its password/userinfo and with secret-looking query values hidden."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return HIDDEN
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{HIDDEN}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, HIDDEN if secret_name(k) and not _reference(v) else v) for k, v in pairs], safe="*$"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Free text (an error message quoting a command line or a URL), word by word as `args` are."""
    pieces = re.split(r"(\s+)", text)
    words = pieces[::2]
    cores = [w.strip("'\"()[]{},;") for w in words]
    shown = redact_args(cores)
    for i, (word, core, new) in enumerate(zip(words, cores, shown, strict=True)):
        if new != core:
            pieces[2 * i] = word.replace(core, new, 1) if core else word
    return "".join(pieces)


def _redact_arg(arg: str) -> str:
    if _reference(arg):
        return arg
    if _URL.fullmatch(arg):
        return redact_url(arg)
    if arg.startswith("-") and "=" in arg:
        flag, value = arg.split("=", 1)
        if secret_name(flag) and not _reference(value):
            return f"{flag}={HIDDEN}"
        return f"{flag}={_redact_arg(value)}"
    if not arg.startswith("-") and "=" in arg:
        name, value = arg.split("=", 1)
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name) and secret_name(name) and not _reference(value):
            return f"{name}={HIDDEN}"
    if arg.lower().startswith(("bearer ", "basic ", "token ")) or _TOKEN_SHAPES.match(arg):
        return HIDDEN
    return _URL.sub(lambda m: redact_url(m.group(0)), arg)  # a URL inside (`--url=...` done above)


def redact_args(args: list[Any]) -> list[Any]:
    """Command-line arguments with their secrets hidden (see the module docstring)."""
    shown: list[Any] = []
    after_secret_flag = False
    for arg in args:
        if not isinstance(arg, str):
            shown.append(redact(arg))
            continue
        if after_secret_flag and not arg.startswith("-"):
            shown.append(arg if _reference(arg) else HIDDEN)
            after_secret_flag = False
            continue
        after_secret_flag = arg.startswith("-") and "=" not in arg and secret_name(arg)
        shown.append(_redact_arg(arg))
    return shown


def redact(value: Any, key: str = "") -> Any:
    """`value` (an MCP server's settings, or all of them) as a non-admin may see it."""
    if isinstance(value, dict):
        if key in _ALWAYS_SECRET:
            return {k: v if isinstance(v, str) and _reference(v) else HIDDEN for k, v in value.items()}
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return redact_args(value) if key == "args" else [redact(v, key) for v in value]
    if isinstance(value, str):
        if _reference(value):
            return value
        if secret_name(key):
            return HIDDEN
        if key == "url" or _URL.fullmatch(value):
            return redact_url(value)
        return _redact_arg(value) if key in ("command", "args") else value
    return HIDDEN if secret_name(key) and value is not None and not isinstance(value, bool) else value
