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
import struct
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))
from generation import Api, Failed, multipart, prompt_text, read_json_object

ORDER = ("prompt", "subject", "characters", "scene", "style", "composition", "lighting", "color_palette",
         "mood", "technical")  # fmt: skip
NOT_CONFIGURED = (
    "no image generation API is configured for the sandbox: set IMAGE_API_KEY (and IMAGE_API_BASE_URL "
    "for a server other than OpenAI's, IMAGE_MODEL for a model other than gpt-image-1) under "
    "sandbox.environment in config.yaml, and sandbox.allow_network: true, then restart Antler. "
    "Tell the user this; do not make up an image."
)


def size_for(aspect: str) -> str:
    try:
        wide, high = (float(n) for n in aspect.split(":"))
        ratio = wide / high
    except (ValueError, ZeroDivisionError):
        raise Failed(f"--aspect-ratio must look like 16:9, not {aspect!r}") from None
    return "1536x1024" if ratio > 1.2 else "1024x1536" if ratio < 1 / 1.2 else "1024x1024"


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
    spec = read_json_object(args.prompt_file)
    prompt = prompt_text(
        spec, ORDER, "the prompt file says nothing to draw: give at least a prompt or a subject"
    )
    for path in args.reference_images:
        if not path.is_file():
            raise Failed(f"reference image {path}: no such file")
    api = Api("images", "IMAGE", "gpt-image-1", NOT_CONFIGURED, timeout=110)
    model = api.model
    size = args.size or size_for(args.aspect_ratio)
    if args.reference_images:
        field = "image[]" if len(args.reference_images) > 1 else "image"
        body, kind = multipart({"model": model, "prompt": prompt, "size": size, "n": "1"},
                               [(field, p) for p in args.reference_images])  # fmt: skip
        answer = api.json("/images/edits", body, kind)
    else:
        payload = {"model": model, "prompt": prompt, "size": size, "n": 1}
        answer = api.json("/images/generations", json.dumps(payload).encode(), "application/json")
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
