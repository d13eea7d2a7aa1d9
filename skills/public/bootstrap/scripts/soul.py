#!/usr/bin/env python3
"""Write a custom agent's SOUL.md from what the onboarding conversation found out.

    python3 soul.py ANSWERS.json --out SOUL.md

ANSWERS.json (strings unless said):
  required  agent_name, user_name, user_role, purpose (what the agent is for),
            traits (a list of 3-5 behaviour rules), style (how it talks),
            pushback (how honest or blunt it should be), autonomy (when it acts alone
            and when it asks), failure (what it does when it gets something wrong)
  optional  language (answer in it), vision (where the user wants to get), boundaries
            (a list of things it must never do)
Missing required answers are listed with the question to ask (exit 1, nothing written);
the SOUL.md is written in the second person ("You are ...") and kept under 4,000
characters, as setup_agent stores it. Standard library; the same answers give the same file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

QUESTIONS = {
    "agent_name": "what should the agent be called?",
    "user_name": "what is the user's name?",
    "user_role": "what does the user do (role, work, context)?",
    "purpose": "what is the agent for; what should it take off the user's plate?",
    "traits": "which 3 to 5 behaviours should it always show?",
    "style": "how should it talk (length, tone, formality)?",
    "pushback": "should it push back and say when the user is wrong, and how bluntly?",
    "autonomy": "when may it act on its own, and when must it ask first?",
    "failure": "what should it do when it makes a mistake or does not know?",
}
LIMIT = 4000


def missing(answers: dict[str, Any]) -> list[str]:
    gaps = [key for key in QUESTIONS if not answers.get(key)]
    traits = answers.get("traits")
    if traits and not (isinstance(traits, list) and 3 <= len(traits) <= 5):
        gaps.append("traits")
    return gaps


def render(a: dict[str, Any]) -> str:
    lines = [
        f"# {a['agent_name']}",
        "",
        f"You are {a['agent_name']}, {a['user_name']}'s AI partner. {a['user_name']} is {a['user_role']}.",
        f"Your purpose: {a['purpose']}",
        "",
        "## How you behave",
        "",
        *[f"- {trait}" for trait in a["traits"]],
        "",
        "## How you talk",
        "",
        f"- {a['style']}",
        f"- Honesty: {a['pushback']}",
    ]
    if a.get("language"):
        lines.append(f"- Answer in {a['language']} unless asked otherwise.")
    lines += ["", "## Working alone", "", f"- {a['autonomy']}", f"- When you get it wrong: {a['failure']}"]
    if a.get("vision"):
        lines += ["", "## Where we are going", "", a["vision"]]
    if a.get("boundaries"):
        lines += ["", "## Never", "", *[f"- {b}" for b in a["boundaries"]]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("answers", type=Path, help="the answers as JSON")
    parser.add_argument("--out", type=Path, required=True, help="where to write SOUL.md")
    args = parser.parse_args(argv)
    try:
        answers = json.loads(args.answers.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        print(f"error: cannot read {args.answers}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(answers, dict):
        print("error: the answers must be a JSON object", file=sys.stderr)
        return 2
    gaps = missing(answers)
    if gaps:
        print(f"error: {len(gaps)} answers missing; ask the user:", file=sys.stderr)
        for key in gaps:
            print(f"- {key}: {QUESTIONS[key]}", file=sys.stderr)
        return 1
    text = render(answers)
    if len(text) > LIMIT:
        print(
            f"error: the SOUL.md is {len(text)} characters; shorten the answers to under {LIMIT}",
            file=sys.stderr,
        )
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(
        f"wrote {args.out}: {answers['agent_name']}, {len(answers['traits'])} traits, {len(text)} characters"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
