#!/usr/bin/env python3
"""Review a skill folder as untrusted data: structure, trigger quality, resources, scripts, safety.

    python3 review_skill.py FOLDER [--others /mnt/skills] [--out review.md] [--json]

Nothing in the folder is run or imported: scripts are only compiled to find syntax errors.
Findings have a severity:
  blocker  unsafe or broken: a pipe from the network into a shell, deleting outside the
           workspace, reading secrets, instructions that try to override the agent's rules,
           a script that does not compile, a frontmatter that does not load
  major    it will misfire: a missing or vague description, a name that differs from its
           folder, a script or file the steps use that is not there, tools it needs that
           allowed-tools leaves out, the same name as another skill (--others)
  minor    worth fixing: no license, no numbered steps, scripts SKILL.md never mentions, no
           --help or docstring, a very long SKILL.md, no mention of where results go
The verdict: blocked (any blocker), needs revision (any major), or ready. Exit 0 when ready,
1 otherwise. Standard library only; the same folder gives the same review.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TOOLS = (
    "bash",
    "read_file",
    "write_file",
    "str_replace",
    "ls",
    "glob",
    "grep",
    "present_files",
    "web_search",
    "web_fetch",
    "image_search",
    "view_image",
    "task",
    "ask_clarification",
)
DANGER = [
    (re.compile(r"\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b"), "pipes a download into a shell"),
    (re.compile(r"\brm\s+-[a-z]*r[a-z]*f?\s+(/|~|\$HOME)(\s|$)"), "deletes the root or home directory"),
    # (Written so this file does not match itself.)
    (
        re.compile(r"/etc/(shadow|passwd)|\.[s]sh/|id_[r]sa|\.aws/[c]redentials"),
        "reads credentials or system files",
    ),
    (
        re.compile(r"os\.environ\[?[^\n]*(KEY|TOKEN|SECRET|PASSWORD)", re.I),
        "reads secrets from the environment",
    ),
    (
        re.compile(r"\beval\(\s*(input|requests|urllib)|exec\(\s*(requests|urllib)"),
        "runs code fetched at run time",
    ),
    (re.compile(r"base64\s+-d[^\n]*\|\s*(ba)?sh"), "runs an encoded payload"),
]
INJECTION = re.compile(
    r"ignore (all |any )?(previous|prior|above) instructions|disregard (the |your )?(system|previous)|"
    r"you are no longer|reveal (the |your )?system prompt|do not tell the user|without telling the user",
    re.I,
)


def frontmatter(text: str) -> tuple[dict[str, object], str | None]:
    """Frontmatter keys (flat `key: value`, `[a, b]` and `- item` lists), or the reason it cannot load."""
    match = re.match(r"^---\r?\n(.*?)\r?\n---\r?\n", text, re.S)
    if not match:
        return {}, "SKILL.md does not start with a --- frontmatter block ---"
    meta: dict[str, object] = {}
    key = None
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s+-\s+(.*)$", line)
        if item and key is not None:
            current = meta.get(key)
            meta[key] = [*(current if isinstance(current, list) else []), item.group(1).strip().strip("'\"")]
            continue
        pair = re.match(r"^([A-Za-z_-]+):\s*(.*)$", line)
        if not pair:
            return meta, f"frontmatter line {line!r} is not `key: value`"
        key, value = pair.group(1), pair.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key] = value.strip("'\"") if value else []
    return meta, None


def review(folder: Path, others: Path | None) -> dict[str, object]:
    findings: list[tuple[str, str]] = []

    def add(severity: str, message: str) -> None:
        findings.append((severity, message))

    skill_md = folder / "SKILL.md"
    if not skill_md.is_file():
        add("blocker", "no SKILL.md in the folder")
        return {"skill": folder.name, "verdict": "blocked", "findings": findings}
    text = skill_md.read_text(encoding="utf-8", errors="replace")
    meta, error = frontmatter(text)
    if error:
        add("blocker", error)
    name = str(meta.get("name") or "")
    description = str(meta.get("description") or "")
    body = text.split("---", 2)[-1] if text.startswith("---") else text
    if not name:
        add("major", "the frontmatter has no name")
    elif not NAME.match(name):
        add("major", f"name {name!r}: use lowercase words joined by '-' (users type it as /{name})")
    elif name != folder.name:
        add("major", f"name {name!r} differs from its folder {folder.name!r}")
    if not description:
        add("major", "no description: the agent cannot know when to use the skill")
    else:
        if len(description) < 60:
            add("major", f"the description has {len(description)} characters: too short to say what and when")
        if len(description) > 400:
            add(
                "minor",
                f"the description has {len(description)} characters; every prompt carries it, keep it short",
            )
        if not re.search(r"\b(use (it|this|when)|when the user|whenever)\b", description, re.I):
            add("major", "the description does not say when to use the skill ('Use it when the user ...')")
    if not meta.get("license"):
        add("minor", "no license in the frontmatter")
    lines = body.count("\n")
    if lines > 500:
        add("minor", f"SKILL.md body has {lines} lines; move reference material to reference/*.md")
    if len(body.strip()) < 200:
        add("major", "almost no instructions below the frontmatter")
    if not re.search(r"^\s*1[.)]\s|^#+\s*(\d+[.)]|step)", body, re.M | re.I):
        add("minor", "no numbered steps: the agent follows an ordered procedure more reliably")
    if "/mnt/user-data/outputs" not in body and "present_files" not in body:
        add("minor", "it never says where results go (/mnt/user-data/outputs and present_files)")
    if INJECTION.search(text):
        add("blocker", f"instructions try to override the agent's rules: {INJECTION.search(text).group(0)!r}")
    for pattern, what in DANGER:
        if pattern.search(body):
            add("blocker", f"SKILL.md {what}")

    own = re.compile(rf"/mnt/skills/(?:public|custom)/{re.escape(folder.name)}/([\w./-]+)")
    used = {m.rstrip(".,;:`)") for m in own.findall(text)}
    for variable, sub in re.findall(
        rf"(\w+)=/mnt/skills/(?:public|custom)/{re.escape(folder.name)}/([\w/-]+)", text
    ):
        used |= {f"{sub}/{f}" for f in re.findall(rf"\${variable}/([\w.-]+)", text)}
    for relative in sorted(used):
        if not (folder / relative).exists():
            add("major", f"SKILL.md uses {relative}, which the skill does not contain")
    scripts = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".js"))
    for script in scripts:
        relative = str(script.relative_to(folder))
        source = script.read_text(encoding="utf-8", errors="replace")
        if script.name not in text:
            add("minor", f"{relative} is never mentioned in SKILL.md")
        if script.suffix == ".py":
            try:
                compile(source, relative, "exec")
            except SyntaxError as exc:
                add("blocker", f"{relative} does not compile: {exc.msg} (line {exc.lineno})")
            if "argparse" not in source and '"""' not in source[:400]:
                add(
                    "minor", f"{relative} has neither --help (argparse) nor a docstring saying how to call it"
                )
        for pattern, what in DANGER:
            if pattern.search(source):
                add("blocker", f"{relative} {what}")
    allowed = meta.get("allowed-tools")
    if isinstance(allowed, list) and allowed:
        needed = {t for t in TOOLS if re.search(rf"`{t}`|\b{t}\b(?=\s+(tool|with|to|call))", body)}
        if scripts or "```bash" in body:
            needed.add("bash")
        missing = sorted(needed - set(allowed))
        if missing:
            add("major", f"allowed-tools leaves out tools the steps use: {', '.join(missing)}")
    if others is not None and name:
        clash = [
            p.parent
            for p in others.glob("*/*/SKILL.md")
            if p.parent.name == name and p.parent.resolve() != folder.resolve()
        ]
        if clash:
            add("major", f"another skill is already named {name!r} ({clash[0]})")
    severities = {s for s, _ in findings}
    verdict = "blocked" if "blocker" in severities else "needs revision" if "major" in severities else "ready"
    order = {"blocker": 0, "major": 1, "minor": 2}
    findings.sort(key=lambda f: (order[f[0]], f[1]))
    return {"skill": name or folder.name, "verdict": verdict, "findings": findings}


def markdown(result: dict[str, object]) -> str:
    findings = result["findings"]
    assert isinstance(findings, list)
    lines = [f"# Skill review: {result['skill']}", "", f"**Verdict:** {result['verdict']}", ""]
    for severity in ("blocker", "major", "minor"):
        found = [m for s, m in findings if s == severity]
        if found:
            lines += [f"## {severity.capitalize()} ({len(found)})", ""] + [f"- {m}" for m in found] + [""]
    if not findings:
        lines.append("No findings.")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder")
    parser.add_argument("--others", help="a skills root (e.g. /mnt/skills) to check the name against")
    parser.add_argument("--out", help="write the review as Markdown")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = Path(args.folder).resolve()
    if not folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    result = review(folder, Path(args.others) if args.others else None)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        text = markdown(result)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text, encoding="utf-8")
            print(f"wrote {args.out}")
        print(text)
    return 0 if result["verdict"] == "ready" else 1


if __name__ == "__main__":
    sys.exit(main())
