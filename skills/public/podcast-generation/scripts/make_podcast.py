#!/usr/bin/env python3
"""Turn a podcast script into one audio file, each line spoken by its host's voice through an
OpenAI-compatible speech API (`/audio/speech`), plus a Markdown transcript.

    python3 make_podcast.py SCRIPT.json --out episode.wav [--transcript episode.md] [--pause 0.4]

The script:

    {"title": "Heat pumps, explained",
     "hosts": {"Ada": {"voice": "nova"}, "Bo": {"voice": "onyx", "instructions": "calm, curious"}},
     "lines": [{"speaker": "Ada", "text": "Welcome back..."}, {"speaker": "Bo", "text": "..."}]}

Configured by the sandbox's environment (`sandbox.environment` in config.yaml):
SPEECH_API_KEY (or OPENAI_API_KEY), SPEECH_API_BASE_URL (or OPENAI_BASE_URL; default OpenAI's),
SPEECH_MODEL (default gpt-4o-mini-tts); the sandbox must reach it (`sandbox.allow_network: true`).
Exit 2 when it is not configured, 1 on any other error; `error: ...` says what to do.
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
import wave
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))
from generation import Api, Failed, read_json

MAX_INPUT = 4000  # the speech API takes up to 4096 characters a call
NOT_CONFIGURED = (
    "no speech API is configured for the sandbox: set SPEECH_API_KEY (and SPEECH_API_BASE_URL for a "
    "server other than OpenAI's, SPEECH_MODEL for a model other than gpt-4o-mini-tts) under "
    "sandbox.environment in config.yaml, and sandbox.allow_network: true, then restart Antler. "
    "Tell the user this and give them the script and transcript instead."
)


def pcm_of(data: bytes) -> tuple[tuple[int, int, int], bytes]:
    """(channels, sample width, rate) and the samples of a WAV, read by its chunks: streamed WAVs
    announce a data length they do not have, which the wave module would trust."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise Failed("the speech API sent something that is not a WAV file")
    position, fmt = 12, None
    while position + 8 <= len(data):
        kind, size = data[position : position + 4], struct.unpack("<I", data[position + 4 : position + 8])[0]
        body = position + 8
        if kind == b"fmt ":
            channels, rate = struct.unpack("<HI", data[body + 2 : body + 8])
            width = struct.unpack("<H", data[body + 14 : body + 16])[0] // 8
            fmt = (channels, width, rate)
        elif kind == b"data":
            if fmt is None:
                break
            return fmt, data[body : min(len(data), body + size)]
        position = body + size + (size & 1)
    raise Failed("the speech API's WAV has no format or no samples")


def pieces(text: str) -> list[str]:
    """Text cut at sentence ends into parts the API takes in one call."""
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        while len(sentence) > MAX_INPUT:
            out.append(sentence[:MAX_INPUT])
            sentence = sentence[MAX_INPUT:]
        if out and len(out[-1]) + 1 + len(sentence) <= MAX_INPUT:
            out[-1] += " " + sentence
        elif sentence:
            out.append(sentence)
    return out


def check(script: Any) -> tuple[str, dict[str, dict[str, Any]], list[dict[str, str]]]:
    if not isinstance(script, dict):
        raise Failed("the script must be a JSON object with hosts and lines")
    hosts, lines = script.get("hosts") or {}, script.get("lines") or []
    if not hosts or not lines:
        raise Failed("the script needs hosts (name -> voice) and at least one line")
    for n, line in enumerate(lines, 1):
        if line.get("speaker") not in hosts:
            raise Failed(
                f"line {n}: speaker {line.get('speaker')!r} is not one of the hosts ({', '.join(hosts)})"
            )
        if not str(line.get("text", "")).strip():
            raise Failed(f"line {n} has no text")
    return str(script.get("title", "")), hosts, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path, help="the podcast script (JSON)")
    parser.add_argument("--out", type=Path, required=True, help="the episode (.wav)")
    parser.add_argument("--transcript", type=Path, help="also write the transcript (Markdown)")
    parser.add_argument("--pause", type=float, default=0.4, help="seconds of silence between lines")
    args = parser.parse_args(argv)
    try:
        title, hosts, lines = check(read_json(args.script))
        if args.transcript:
            text = [f"# {title}" if title else "# Transcript", ""]
            text += [f"**{line['speaker']}:** {line['text'].strip()}\n" for line in lines]
            args.transcript.parent.mkdir(parents=True, exist_ok=True)
            args.transcript.write_text("\n".join(text), encoding="utf-8")
        api = Api("speech", "SPEECH", "gpt-4o-mini-tts", NOT_CONFIGURED, timeout=100)
        fmt: tuple[int, int, int] | None = None
        samples: list[bytes] = []
        for n, line in enumerate(lines, 1):
            host = hosts[line["speaker"]]
            for part in pieces(line["text"]):
                payload = {
                    "model": api.model,
                    "input": part,
                    "voice": host.get("voice", "alloy"),
                    "response_format": "wav",
                }
                if host.get("instructions"):
                    payload["instructions"] = host["instructions"]
                this, pcm = pcm_of(api.post_json("/audio/speech", payload))
                if fmt is not None and this != fmt:
                    raise Failed(
                        f"line {n} came back as {this}, the others as {fmt}: the voices must share a format"
                    )
                fmt = this
                samples.append(pcm)
            if fmt is not None and n < len(lines):
                channels, width, rate = fmt
                samples.append(b"\x00" * int(rate * args.pause) * channels * width)
    except Failed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    assert fmt is not None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(args.out), "wb") as out:
        out.setnchannels(fmt[0])
        out.setsampwidth(fmt[1])
        out.setframerate(fmt[2])
        out.writeframes(b"".join(samples))
    seconds = sum(len(s) for s in samples) / (fmt[0] * fmt[1] * fmt[2])
    said = f"wrote {args.out}: {seconds:.1f} s, {len(lines)} lines, {len(hosts)} voices, model {api.model}"
    print(said + (f"; transcript {args.transcript}" if args.transcript else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
