#!/usr/bin/env python3
"""Generate a short video through an OpenAI-compatible Videos API (create a job, wait for it,
download the MP4).

    python3 generate_video.py --prompt-file PROMPT.json --out clip.mp4 [--seconds 8] [--size 1280x720]
        [--reference-image first-frame.png] [--wait 100] [--poll-seconds 5]
    python3 generate_video.py --resume VIDEO_ID --out clip.mp4      # a job still rendering

The prompt file is {"prompt": "...", "style": ..., "camera": ..., ...}, turned into one prompt.
Rendering takes minutes; past --wait seconds the script prints the job's id and exits 3: run it
again with --resume. Configured by the sandbox's environment (`sandbox.environment`):
VIDEO_API_KEY (or OPENAI_API_KEY), VIDEO_API_BASE_URL (or OPENAI_BASE_URL; default OpenAI's),
VIDEO_MODEL (default sora-2); the sandbox must reach it (`sandbox.allow_network: true`).
Exit 2 when it is not configured, 1 on any other error; `error: ...` says what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

DEFAULT_BASE = "https://api.openai.com/v1"
ORDER = ("prompt", "subject", "scene", "action", "camera", "style", "lighting", "mood", "audio")
NOT_CONFIGURED = (
    "no video generation API is configured for the sandbox: set VIDEO_API_KEY (and VIDEO_API_BASE_URL "
    "for a server other than OpenAI's, VIDEO_MODEL for a model other than sora-2) under "
    "sandbox.environment in config.yaml, and sandbox.allow_network: true, then restart Antler. "
    "Tell the user this; do not make up a video."
)


class Failed(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class Api:
    def __init__(self) -> None:
        key = os.environ.get("VIDEO_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise Failed(NOT_CONFIGURED, 2)
        base = os.environ.get("VIDEO_API_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE
        self.key, self.base = key, base.rstrip("/")
        self.model = os.environ.get("VIDEO_MODEL", "sora-2")

    def call(self, path: str, data: bytes | None = None, content_type: str = "") -> bytes:
        url = f"{self.base}{path}"
        headers = {"Authorization": f"Bearer {self.key}", **({"Content-Type": content_type} if data else {})}
        request = urllib.request.Request(url, data=data, method="POST" if data else "GET", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=100) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise Failed(f"the videos API answered {exc.code} at {url}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Failed(
                f"cannot reach the videos API at {url} ({reason}); "
                "is sandbox.allow_network true and the URL right?"
            ) from None

    def json(self, path: str, data: bytes | None = None, content_type: str = "") -> dict[str, Any]:
        return dict(json.loads(self.call(path, data, content_type)))


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
        raise Failed("the prompt file says nothing to film: give at least a prompt")
    return "\n".join(parts)


def create(api: Api, args: argparse.Namespace) -> str:
    try:
        spec = json.loads(args.prompt_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Failed(f"{args.prompt_file}: no such file") from None
    except json.JSONDecodeError as exc:
        raise Failed(f"{args.prompt_file.name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(spec, dict):
        raise Failed(f"{args.prompt_file.name}: expected a JSON object")
    fields = {
        "model": api.model,
        "prompt": prompt_text(spec),
        "seconds": str(args.seconds),
        "size": args.size,
    }
    if args.reference_image:
        if not args.reference_image.is_file():
            raise Failed(f"reference image {args.reference_image}: no such file")
        boundary = uuid.uuid4().hex
        body = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
            for k, v in fields.items()
        )
        kind = "image/png" if args.reference_image.suffix.lower() == ".png" else "image/jpeg"
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="input_reference"; '
                f'filename="{args.reference_image.name}"\r\nContent-Type: {kind}\r\n\r\n'
            ).encode()
            + args.reference_image.read_bytes()
            + f"\r\n--{boundary}--\r\n".encode()
        )
        job = api.json("/videos", body, f"multipart/form-data; boundary={boundary}")
    else:
        job = api.json("/videos", json.dumps(fields).encode(), "application/json")
    if not job.get("id"):
        raise Failed(f"the videos API started no job: {json.dumps(job)[:300]}")
    return str(job["id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt-file", type=Path, help="the video prompt (JSON)")
    what.add_argument("--resume", metavar="VIDEO_ID", help="wait for a job started earlier")
    parser.add_argument("--out", "--output-file", dest="out", type=Path, required=True, help="the .mp4")
    parser.add_argument("--seconds", type=int, default=8, help="length (sora-2: 4, 8 or 12)")
    parser.add_argument("--size", default="1280x720", help="1280x720, 720x1280, ...")
    parser.add_argument("--reference-image", type=Path, help="an image the video starts from")
    parser.add_argument("--wait", type=float, default=100, help="seconds to wait before handing back the id")
    parser.add_argument("--poll-seconds", type=float, default=5)
    args = parser.parse_args(argv)
    try:
        api = Api()
        video_id = args.resume or create(api, args)
        deadline = time.monotonic() + args.wait
        while True:
            job = api.json(f"/videos/{video_id}")
            status = job.get("status")
            if status == "completed":
                break
            if status in ("failed", "cancelled"):
                reason = (job.get("error") or {}).get("message", "no reason given")
                raise Failed(f"the video job {video_id} {status}: {reason}")
            if time.monotonic() >= deadline:
                progress = job.get("progress", 0)
                print(f"still rendering: job {video_id} is {status} ({progress}%); run again with "
                      f"--resume {video_id} --out {args.out}")  # fmt: skip
                return 3
            time.sleep(args.poll_seconds)
        data = api.call(f"/videos/{video_id}/content")
    except Failed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    if data[4:8] != b"ftyp":
        print("error: the videos API sent something that is not an MP4 file", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}: MP4, {len(data):,} bytes, job {video_id}, model {api.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
