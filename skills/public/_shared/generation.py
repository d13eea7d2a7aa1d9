"""What the generation skills' scripts share (image-generation, podcast-generation,
video-generation): an OpenAI-compatible API configured by the sandbox's environment and called with
the standard library, its failures turned into `error:` lines that say what to do; the JSON files
they read; the structured prompt turned into one text prompt.

Not a skill (no SKILL.md: the loader passes it by), but shipped and mounted with the public skills
(`/mnt/skills/public/_shared`); a script puts this folder on `sys.path` and imports `generation`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

DEFAULT_BASE = "https://api.openai.com/v1"


class Failed(Exception):
    """What a script prints as `error: ...`, exiting with `code` (2: the API is not configured)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class Api:
    """The endpoint of one kind of generation API, from `<ENV>_API_KEY` (or OPENAI_API_KEY),
    `<ENV>_API_BASE_URL` (or OPENAI_BASE_URL; default OpenAI's) and `<ENV>_MODEL`.

    Args:
        name: what the errors call it ("images", "speech", "videos").
        env: the variables' prefix ("IMAGE").
        default_model: the model when `<ENV>_MODEL` is unset.
        not_configured: the error (exit 2) when no key is set: what to configure, what to tell the user.
        timeout: seconds one call may take.
    """

    def __init__(self, name: str, env: str, default_model: str, not_configured: str, timeout: float) -> None:
        key = os.environ.get(f"{env}_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise Failed(not_configured, 2)
        base = os.environ.get(f"{env}_API_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE
        self.name, self.key, self.base, self.timeout = name, key, base.rstrip("/"), timeout
        self.model = os.environ.get(f"{env}_MODEL", default_model)

    def call(self, path: str, data: bytes | None = None, content_type: str = "") -> bytes:
        """The answer's body to a POST of `data` (a GET without), or `Failed` saying what went wrong."""
        url = f"{self.base}{path}"
        headers = {"Authorization": f"Bearer {self.key}", **({"Content-Type": content_type} if data else {})}
        request = urllib.request.Request(url, data=data, method="POST" if data else "GET", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise Failed(f"the {self.name} API answered {exc.code} at {url}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Failed(
                f"cannot reach the {self.name} API at {url} ({reason}); "
                "is sandbox.allow_network true and the URL right?"
            ) from None

    def json(self, path: str, data: bytes | None = None, content_type: str = "") -> dict[str, Any]:
        """`call`, its answer read as a JSON object."""
        return dict(json.loads(self.call(path, data, content_type)))

    def post_json(self, path: str, payload: dict[str, Any]) -> bytes:
        """`call` with `payload` sent as JSON."""
        return self.call(path, json.dumps(payload).encode(), "application/json")


def multipart(fields: dict[str, str], files: list[tuple[str, Path]]) -> tuple[bytes, str]:
    """A multipart/form-data body of `fields` and image `files` (form name, path), and its content type."""
    boundary = uuid.uuid4().hex
    out = b""
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    for name, path in files:
        kind = {".png": "image/png", ".webp": "image/webp"}.get(path.suffix.lower(), "image/jpeg")
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{path.name}"\r\n'
        out += f"{head}Content-Type: {kind}\r\n\r\n".encode() + path.read_bytes() + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def read_json(path: Path) -> Any:
    """The JSON in `path`, or `Failed` naming the file and what is wrong with it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Failed(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise Failed(f"{path.name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """`read_json`, which must be an object."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise Failed(f"{path.name}: expected a JSON object")
    return data


def prompt_text(spec: dict[str, Any], order: tuple[str, ...], empty: str) -> str:
    """A structured prompt as one text: `prompt` first, then each other field in `order` (the rest
    sorted after them) as "Field: value", and `negative_prompt` as a closing "Avoid: ..."; `Failed`
    with `empty` when it says nothing."""
    parts = []
    for key in [*order, *sorted(set(spec) - set(order) - {"negative_prompt"})]:
        value = spec.get(key)
        if value in (None, "", [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(text if key == "prompt" else f"{key.replace('_', ' ').capitalize()}: {text}")
    if spec.get("negative_prompt"):
        parts.append(f"Avoid: {spec['negative_prompt']}")
    if not parts:
        raise Failed(empty)
    return "\n".join(parts)
