#!/usr/bin/env python3
"""Generate an image through an OpenAI-compatible images API and save it.

    python3 generate_image.py --prompt-file PROMPT.json --out image.png [--aspect-ratio 16:9]
        [--size 1536x1024] [--reference-images a.png b.jpg]

The prompt file is structured (`prompt`, `subject`, `characters`, `style`, `composition`,
`lighting`, `color_palette`, `negative_prompt`, ...) or a plain {"prompt": "..."}; it is turned
into one text prompt. With reference images the edits endpoint is used (the images as input).

Configured by the sandbox's environment (`sandbox.environment` in config.yaml):
IMAGE_API_KEY (or OPENAI_API_KEY), IMAGE_API_BASE_URL (or OPENAI_BASE_URL; default OpenAI's),
IMAGE_MODEL (default gpt-image-1); the sandbox must reach it (`sandbox.allow_network: true`).
Exit 2 when it is not configured, 1 on any other error; `error: ...` says what to do.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

DEFAULT_BASE = "https://api.openai.com/v1"
ORDER = ("prompt", "subject", "characters", "scene", "style", "composition", "lighting", "color_palette",
         "mood", "technical")  # fmt: skip
NOT_CONFIGURED = (
    "no image generation API is configured for the sandbox: set IMAGE_API_KEY (and IMAGE_API_BASE_URL "
    "for a server other than OpenAI's, IMAGE_MODEL for a model other than gpt-image-1) under "
    "sandbox.environment in config.yaml, and sandbox.allow_network: true, then restart Antler. "
    "Tell the user this; do not make up an image."
)


class Failed(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def settings() -> tuple[str, str, str]:
    key = os.environ.get("IMAGE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise Failed(NOT_CONFIGURED, 2)
    base = os.environ.get("IMAGE_API_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE
    return key, base.rstrip("/"), os.environ.get("IMAGE_MODEL", "gpt-image-1")


def call(url: str, key: str, data: bytes, content_type: str) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=110) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        try:
            detail = json.loads(detail)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass
        raise Failed(f"the images API answered {exc.code} at {url}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Failed(
            f"cannot reach the images API at {url} ({reason}); "
            "is sandbox.allow_network true and the URL right?"
        ) from None


def prompt_text(spec: dict[str, Any]) -> str:
    parts = []
    for key in [*ORDER, *sorted(set(spec) - set(ORDER) - {"negative_prompt"})]:
        value = spec.get(key)
        if value in (None, "", [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(text if key == "prompt" else f"{key.replace('_', ' ').capitalize()}: {text}")
    if spec.get("negative_prompt"):
        parts.append(f"Avoid: {spec['negative_prompt']}")
    if not parts:
        raise Failed("the prompt file says nothing to draw: give at least a prompt or a subject")
    return "\n".join(parts)


def size_for(aspect: str) -> str:
    try:
        wide, high = (float(n) for n in aspect.split(":"))
        ratio = wide / high
    except (ValueError, ZeroDivisionError):
        raise Failed(f"--aspect-ratio must look like 16:9, not {aspect!r}") from None
    return "1536x1024" if ratio > 1.2 else "1024x1536" if ratio < 1 / 1.2 else "1024x1024"


def multipart(fields: dict[str, str], files: list[tuple[str, Path]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = b""
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    for name, path in files:
        kind = {".png": "image/png", ".webp": "image/webp"}.get(path.suffix.lower(), "image/jpeg")
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{path.name}"\r\n'
        out += f"{head}Content-Type: {kind}\r\n\r\n".encode() + path.read_bytes() + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def describe(data: bytes) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        width, height = struct.unpack(">II", data[16:24])
        return f"{width}x{height} PNG"
    if data[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WebP"
    raise Failed("the images API sent something that is not a PNG, JPEG or WebP image")


def generate(args: argparse.Namespace) -> str:
    try:
        spec = json.loads(args.prompt_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Failed(f"{args.prompt_file}: no such file") from None
    except json.JSONDecodeError as exc:
        raise Failed(f"{args.prompt_file.name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(spec, dict):
        raise Failed(f"{args.prompt_file.name}: expected a JSON object")
    prompt = prompt_text(spec)
    for path in args.reference_images:
        if not path.is_file():
            raise Failed(f"reference image {path}: no such file")
    key, base, model = settings()
    size = args.size or size_for(args.aspect_ratio)
    if args.reference_images:
        field = "image[]" if len(args.reference_images) > 1 else "image"
        body, kind = multipart({"model": model, "prompt": prompt, "size": size, "n": "1"},
                               [(field, p) for p in args.reference_images])  # fmt: skip
        answer = call(f"{base}/images/edits", key, body, kind)
    else:
        payload = {"model": model, "prompt": prompt, "size": size, "n": 1}
        answer = call(f"{base}/images/generations", key, json.dumps(payload).encode(), "application/json")
    try:
        item = answer["data"][0]
    except (KeyError, IndexError, TypeError):
        raise Failed(f"the images API sent no image: {json.dumps(answer)[:300]}") from None
    if item.get("b64_json"):
        data = base64.b64decode(item["b64_json"])
    elif item.get("url"):
        with urllib.request.urlopen(item["url"], timeout=60) as download:
            data = download.read()
    else:
        raise Failed("the images API sent neither b64_json nor url")
    what = describe(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    refs = f", {len(args.reference_images)} reference image(s)" if args.reference_images else ""
    return f"wrote {args.out}: {what}, {len(data):,} bytes, model {model}{refs}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt-file", type=Path, required=True, help="the structured prompt (JSON)")
    parser.add_argument("--out", "--output-file", dest="out", type=Path, required=True)
    parser.add_argument("--aspect-ratio", default="1:1", help="16:9, 1:1, 2:3, ... (picks the nearest size)")
    parser.add_argument("--size", help="an exact size the model takes, e.g. 1536x1024")
    parser.add_argument("--reference-images", type=Path, nargs="*", default=[])
    try:
        print(generate(parser.parse_args(argv)))
    except Failed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
