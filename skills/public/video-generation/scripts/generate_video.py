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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))
from generation import Api, Failed, multipart, prompt_text, read_json_object

ORDER = ("prompt", "subject", "scene", "action", "camera", "style", "lighting", "mood", "audio")
NOT_CONFIGURED = (
    "no video generation API is configured for the sandbox: set VIDEO_API_KEY (and VIDEO_API_BASE_URL "
    "for a server other than OpenAI's, VIDEO_MODEL for a model other than sora-2) under "
    "sandbox.environment in config.yaml, and sandbox.allow_network: true, then restart Antler. "
    "Tell the user this; do not make up a video."
)


def create(api: Api, args: argparse.Namespace) -> str:
    spec = read_json_object(args.prompt_file)
    fields = {
        "model": api.model,
        "prompt": prompt_text(spec, ORDER, "the prompt file says nothing to film: give at least a prompt"),
        "seconds": str(args.seconds),
        "size": args.size,
    }
    if args.reference_image:
        if not args.reference_image.is_file():
            raise Failed(f"reference image {args.reference_image}: no such file")
        body, kind = multipart(fields, [("input_reference", args.reference_image)])
        job = api.json("/videos", body, kind)
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
        api = Api("videos", "VIDEO", "sora-2", NOT_CONFIGURED, timeout=100)
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
