#!/usr/bin/env python3
"""Plan a surprise: pick one to three of the skills installed here and a theme to combine them in.

    python3 plan_surprise.py [--seed TEXT] [--count 1-3] [--root /mnt/skills] [--exclude NAME,...]

The pick follows from the seed (the user's words, a date, their interests): the same seed and
skills give the same plan, another seed another plan. Skills about skills (finding, creating,
reviewing them), agent setup and this one are never picked; nor are those in --exclude (the
ones disabled in your prompt). Prints the theme, each picked skill with its SKILL.md to read,
and the deliverable to make; with no other skill installed, a fallback plan that needs none.
No network; standard library.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

NEVER = {"surprise-me", "find-skills", "skill-creator", "skill-reviewer", "bootstrap"}
THEMES = (
    "a field guide to something small and overlooked",
    "a 'what if' about history taking another turn",
    "the hidden numbers behind an everyday habit",
    "a gift for the user's favourite topic, from what you know of them",
    "this season, seen from somewhere far away",
    "an explorer's log of a strange ordinary object",
    "the story of an invention told as if it were news",
    "a tiny museum of one idea",
)
FALLBACK = (
    "no other skill is installed: build one self-contained HTML page (a visual poem, a small "
    "generative artwork or an interactive story) and save it in /mnt/user-data/outputs"
)


def description(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = re.search(r"^description:\s*(.*)$", text, re.MULTILINE)
    return (found.group(1).strip().strip("\"'") if found else "")[:160]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", default="surprise", help="what the pick follows from (the user's words)")
    parser.add_argument("--count", type=int, default=2, choices=(1, 2, 3), help="skills to combine (2)")
    parser.add_argument("--root", type=Path, default=Path("/mnt/skills"), help="the skills folder")
    parser.add_argument("--exclude", default="", help="skills not to pick, comma-separated")
    args = parser.parse_args(argv)
    excluded = NEVER | {n.strip() for n in args.exclude.split(",") if n.strip()}
    found = sorted(
        (p.parent.name, p) for c in ("public", "custom") for p in (args.root / c).glob("*/SKILL.md")
    )
    candidates = [(name, path) for name, path in found if name not in excluded]
    digest = hashlib.sha256(args.seed.strip().lower().encode()).digest()
    theme = THEMES[digest[0] % len(THEMES)]
    print(f"theme: {theme}")
    if not candidates:
        print(f"plan: {FALLBACK}")
        return 0
    # A seeded shuffle: order the candidates by their hash with the seed, take the first ones.
    order = sorted(candidates, key=lambda c: hashlib.sha256(digest + c[0].encode()).hexdigest())
    picked = sorted(order[: args.count])
    print(f"skills ({len(picked)} of {len(candidates)}):")
    for name, path in picked:
        print(f"- {name}: {description(path)}")
        print(f"  read: {path}")
    names = " + ".join(name for name, _ in picked)
    print(f"plan: one deliverable on that theme made with {names}, saved in /mnt/user-data/outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
