#!/usr/bin/env python3
"""Search the skills installed here (public and custom) for the ones that fit a task.

    python3 find_skills.py WORDS... [--root /mnt/skills] [--limit 5] [--json]
    python3 find_skills.py --list [--root /mnt/skills]

Reads each `<root>/<public|custom>/<name>/SKILL.md` (never runs anything) and ranks the skills
by how many of the query's words they contain, then by score: a word in the name counts 3, in
the description 2, in the body 1 (each word once per place; plural and -ing endings ignored).
Prints each match as its `/command`, its category, its description and the SKILL.md to read,
best first (ties by name). Exit 0
with matches, 1 when none matches (with what to do instead), 2 when the root holds no skills.
No network; standard library; the same skills and words give the same answer.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

STOP = {
    "a",
    "an",
    "and",
    "the",
    "to",
    "of",
    "for",
    "in",
    "on",
    "with",
    "my",
    "me",
    "i",
    "is",
    "it",
    "do",
    "can",
    "you",
    "how",
    "what",
    "some",
    "skill",
    "skills",
    "find",
    "help",
    "want",
    "need",
    "make",
    "from",
    "about",
    "into",
    "that",
    "this",
    "there",
    "any",
    "turn",
    "get",
    "give",
    "please",
    "would",
    "like",
    "user",
    "use",
}


@dataclass
class Skill:
    name: str
    category: str
    description: str
    body: str
    path: str


def stem(word: str) -> str:
    for ending in ("ing", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def words(text: str) -> set[str]:
    return {stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def frontmatter(text: str) -> tuple[dict[str, str], str]:
    """The `key: value` pairs of a SKILL.md's frontmatter (folded `>-`/`|` values joined) and its body."""
    if not text.startswith("---"):
        return {}, text
    head, _, body = text[3:].partition("\n---")
    fields: dict[str, str] = {}
    key = ""
    for line in head.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] = (fields[key] + " " + line.strip()).strip()
            continue
        found = re.match(r"^([A-Za-z_-]+):\s*(.*)$", line)
        if found:
            key, value = found.group(1), found.group(2).strip()
            fields[key] = "" if value in (">", ">-", "|", "|-") else value.strip("\"'")
    return fields, body


def load(root: Path) -> list[Skill]:
    skills = []
    for category in ("public", "custom"):
        for path in sorted((root / category).glob("*/SKILL.md")):
            fields, body = frontmatter(path.read_text(encoding="utf-8", errors="replace"))
            name = fields.get("name") or path.parent.name
            skills.append(Skill(name, category, fields.get("description", ""), body, str(path)))
    return skills


def rank(skills: list[Skill], query: str) -> list[tuple[int, Skill, list[str]]]:
    asked = words(query)
    ranked = []
    for skill in skills:
        name, described, body = (
            words(skill.name.replace("-", " ")),
            words(skill.description),
            words(skill.body),
        )
        score, matched = 0, []
        for word in sorted(asked):
            points = 3 * (word in name) + 2 * (word in described) + (word in body)
            if points:
                score += points
                matched.append(word)
        if score:
            ranked.append((score, skill, matched))
    return sorted(ranked, key=lambda r: (-len(r[2]), -r[0], r[1].name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("words", nargs="*", help="what the user wants to do")
    parser.add_argument("--root", type=Path, default=Path("/mnt/skills"), help="the skills folder")
    parser.add_argument("--limit", type=int, default=5, help="at most this many matches (5)")
    parser.add_argument("--list", action="store_true", help="list every skill instead")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    skills = load(args.root)
    if not skills:
        print(f"error: no skills under {args.root}/public or {args.root}/custom", file=sys.stderr)
        return 2
    if args.list:
        chosen = [(0, s, []) for s in sorted(skills, key=lambda s: s.name)]
    else:
        if not args.words:
            parser.error("give the words to search for, or --list")
        chosen = rank(skills, " ".join(args.words))[: args.limit]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "category": s.category,
                        "score": score,
                        "matched": matched,
                        "description": s.description,
                        "path": s.path,
                    }
                    for score, s, matched in chosen
                ],
                indent=1,
            )
        )
        return 0 if chosen else 1
    if not chosen:
        print(
            f"no skill matches '{' '.join(args.words)}' among {len(skills)} skills: answer with your own "
            "tools, or make one with /skill-creator"
        )
        return 1
    heading = f"{len(skills)} skills" if args.list else f"{len(chosen)} of {len(skills)} skills match"
    print(heading + ":")
    for number, (score, skill, matched) in enumerate(chosen, 1):
        why = f" (score {score}: {', '.join(matched)})" if matched else ""
        print(f"{number}. /{skill.name} [{skill.category}]{why}")
        print(f"   {skill.description}")
        print(f"   read: {skill.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
