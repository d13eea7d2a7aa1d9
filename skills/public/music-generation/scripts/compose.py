#!/usr/bin/env python3
"""Render a written score into music: a WAV file synthesized here (no service, no network) and a
standard MIDI file to open in any music program for real instruments.

    python3 compose.py SCORE.json --out song.wav [--midi song.mid]

The score:

    {"title": "Morning", "tempo": 96,
     "tracks": [
       {"name": "melody", "instrument": "piano", "notes": "E4/1 G4/1 A4/2 R/1 [C4 E4 G4]/3"},
       {"name": "bass", "instrument": "bass", "notes": "C2/4 A1/4"},
       {"name": "beat", "instrument": "drums", "notes": "kick/1 hat/1 snare/1 hat/1"}]}

A note is PITCH/BEATS (C4, F#3, Bb2; R is a rest; [C4 E4 G4] a chord); drums take kick, snare,
hat. Instruments: piano, pluck, pad, bass, lead, drums. Tracks play together from the start
and repeat with "repeat": N. Same score, same files. Errors are `error: ...` lines.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
import wave
from pathlib import Path
from typing import Any

import numpy as np

RATE = 44_100
NOTE = re.compile(r"^([A-Ga-g])([#b]?)(-?\d)$")
SEMITONE = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
DRUMS = {"kick": 36, "snare": 38, "hat": 42}
PROGRAMS = {"piano": 0, "pluck": 25, "pad": 89, "bass": 33, "lead": 81, "drums": 0}


class Invalid(Exception):
    pass


def midi_number(name: str) -> int:
    match = NOTE.match(name)
    if not match:
        raise Invalid(
            f"{name!r} is not a note: write a letter, an optional # or b, and an octave (C4, F#3, Bb2)"
        )
    letter, accidental, octave = match.groups()
    return 12 * (int(octave) + 1) + SEMITONE[letter.upper()] + {"#": 1, "b": -1, "": 0}[accidental]


def parse(track: dict[str, Any], n: int) -> list[tuple[list[int], float]]:
    """A track's events: (MIDI notes sounding, beats); an empty list is a rest."""
    drums = track.get("instrument") == "drums"
    events = []
    for token in re.findall(r"\[[^\]]*\]/[\d.]+|\S+", str(track.get("notes", ""))):
        pitch, _, beats = token.rpartition("/")
        try:
            length = float(beats)
        except ValueError:
            raise Invalid(f"track {n}: {token!r} needs /BEATS after the note (C4/1, R/0.5)") from None
        if length <= 0:
            raise Invalid(f"track {n}: {token!r} lasts no time")
        names = pitch.strip("[]").split()
        if names == ["R"] or names == ["r"]:
            events.append(([], length))
        elif drums:
            unknown = [x for x in names if x not in DRUMS]
            if unknown:
                raise Invalid(f"track {n}: drums play {', '.join(DRUMS)}, not {unknown[0]!r}")
            events.append(([DRUMS[x] for x in names], length))
        else:
            events.append(([midi_number(x) for x in names], length))
    if not events:
        raise Invalid(f"track {n} has no notes")
    return events * int(track.get("repeat", 1))


def voice(instrument: str, note: int, seconds: float) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    if instrument == "drums":
        noise = np.random.default_rng(note).uniform(-1, 1, t.size)
        if note == DRUMS["kick"]:
            return np.sin(2 * np.pi * (50 + 80 * np.exp(-t * 30)) * t) * np.exp(-t * 9)
        return (
            noise * np.exp(-t * (40 if note == DRUMS["hat"] else 14)) * (0.4 if note == DRUMS["hat"] else 0.7)
        )
    f = 440.0 * 2 ** ((note - 69) / 12)
    if instrument == "pad":
        wave_ = sum(np.sin(2 * np.pi * f * d * t) for d in (0.997, 1.0, 1.003)) / 3
        envelope = np.minimum(1, t / 0.3) * np.minimum(1, (seconds - t) / 0.3 + 1e-9)
    elif instrument == "bass":
        wave_ = np.sin(2 * np.pi * f * t) + 0.3 * np.sin(4 * np.pi * f * t)
        envelope = np.exp(-t * 2.0)
    elif instrument == "lead":
        wave_ = 2 * (t * f % 1) - 1
        envelope = np.minimum(1, t / 0.02) * 0.5
    else:  # piano, pluck
        wave_ = sum(np.sin(2 * np.pi * f * k * t) / k**1.5 for k in (1, 2, 3, 4))
        envelope = np.exp(-t * (6.0 if instrument == "pluck" else 2.5))
    release = np.minimum(1, (seconds - t) / 0.02)  # no click at the note's end
    return wave_ * envelope * release


def render(tracks: list[tuple[dict[str, Any], list[tuple[list[int], float]]]], tempo: float) -> np.ndarray:
    beat = 60.0 / tempo
    length = max(sum(b for _, b in events) for _, events in tracks) * beat
    mix = np.zeros(int(RATE * length) + RATE // 2)
    for track, events in tracks:
        instrument, gain = track.get("instrument", "piano"), float(track.get("volume", 0.8))
        position = 0.0
        for notes, beats in events:
            start = int(RATE * position * beat)
            for note in notes:
                sound = voice(instrument, note, beats * beat) * gain / max(1, len(notes)) ** 0.5
                mix[start : start + sound.size] += sound
            position += beats
    peak = np.abs(mix).max()
    return mix / peak * 0.9 if peak > 0 else mix


def midi(tracks: list[tuple[dict[str, Any], list[tuple[list[int], float]]]], tempo: float) -> bytes:
    def varlen(value: int) -> bytes:
        out = [value & 0x7F]
        while value > 0x7F:
            value >>= 7
            out.insert(0, (value & 0x7F) | 0x80)
        return bytes(out)

    ticks = 480
    chunks = []
    conductor = b"\x00\xff\x51\x03" + int(60_000_000 / tempo).to_bytes(3, "big") + b"\x00\xff\x2f\x00"
    chunks.append(b"MTrk" + struct.pack(">I", len(conductor)) + conductor)
    for channel_index, (track, events) in enumerate(tracks):
        drums = track.get("instrument") == "drums"
        channel = 9 if drums else channel_index % 9
        name = str(track.get("name", f"track {channel_index + 1}")).encode()[:100]
        data = b"\x00\xff\x03" + varlen(len(name)) + name
        data += bytes([0x00, 0xC0 | channel, PROGRAMS.get(track.get("instrument", "piano"), 0)])
        wait = 0
        for notes, beats in events:
            duration = round(beats * ticks)
            if not notes:
                wait += duration
                continue
            for i, note in enumerate(notes):
                data += varlen(wait if i == 0 else 0) + bytes([0x90 | channel, note, 96])
            for i, note in enumerate(notes):
                data += varlen(duration if i == 0 else 0) + bytes([0x80 | channel, note, 0])
            wait = 0
        data += varlen(wait) + b"\xff\x2f\x00"
        chunks.append(b"MTrk" + struct.pack(">I", len(data)) + data)
    return b"MThd" + struct.pack(">IHHH", 6, 1, len(chunks), ticks) + b"".join(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("score", type=Path, help="the score (JSON)")
    parser.add_argument("--out", type=Path, required=True, help="the audio (.wav)")
    parser.add_argument("--midi", type=Path, help="also write a standard MIDI file")
    args = parser.parse_args(argv)
    try:
        try:
            score = json.loads(args.score.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise Invalid(f"{args.score}: no such file") from None
        except json.JSONDecodeError as exc:
            raise Invalid(f"{args.score.name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(score, dict) or not score.get("tracks"):
            raise Invalid("the score needs tracks")
        tempo = float(score.get("tempo", 100))
        if not 20 <= tempo <= 300:
            raise Invalid(f"tempo {tempo:g} is not between 20 and 300 beats a minute")
        tracks = []
        for n, track in enumerate(score["tracks"], 1):
            if track.get("instrument", "piano") not in PROGRAMS:
                raise Invalid(f"track {n}: instrument must be one of {', '.join(PROGRAMS)}")
            tracks.append((track, parse(track, n)))
    except Invalid as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    samples = render(tracks, tempo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(args.out), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    said = f"wrote {args.out}: {samples.size / RATE:.1f} s, {len(tracks)} tracks, {tempo:g} bpm"
    if args.midi:
        args.midi.parent.mkdir(parents=True, exist_ok=True)
        args.midi.write_bytes(midi(tracks, tempo))
        said += f"; MIDI {args.midi}"
    print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
