#!/usr/bin/env python3
"""Check a skill folder and pack it as an installable .skill archive.

    python3 package_skill.py SKILL_DIR --out-dir /mnt/user-data/outputs
    python3 package_skill.py SKILL_DIR --check          # only check, write nothing

SKILL_DIR holds SKILL.md (YAML frontmatter with `name` and `description`) and any scripts,
templates or reference files the skill uses. The archive is a zip with the folder at its root
(<name>/SKILL.md, <name>/scripts/...), named <name>.skill. Every problem found is listed; the
archive is written only when there are none. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import zipfile
from pathlib import Path

NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_FILES = 100
MAX_BYTES = 5 * 1024 * 1024
KNOWN_KEYS = {
    "name",
    "description",
    "license",
    "allowed-tools",
    "version",
    "author",
    "compatibility",
    "metadata",
}
SKIPPED = {"__pycache__", ".DS_Store", ".git"}


def frontmatter(text: str) -> tuple[dict[str, object], list[str]]:
    """The frontmatter's keys, and the problems reading it."""
    if not text.startswith("---"):
        return {}, ["SKILL.md must start with a frontmatter block: a line '---', YAML keys, a line '---'"]
    end = text.find("\n---", 3)
    if end < 0:
        return {}, ["the frontmatter block is not closed by a line '---'"]
    block = text[3:end]
    try:
        import yaml  # present on most systems; the reader below covers the simple cases without it
    except ImportError:
        return _simple_yaml(block)
    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        return {}, [f"the frontmatter is not valid YAML: {exc}".replace("\n", " ")]
    if not isinstance(data, dict):
        return {}, ["the frontmatter must be YAML keys (name: ..., description: ...)"]
    return data, []


def _simple_yaml(block: str) -> tuple[dict[str, object], list[str]]:
    """`key: value` lines, `key: [a, b]` and `key:` followed by `- item` lines."""
    data: dict[str, object] = {}
    current: str | None = None
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.fullmatch(r"\s+-\s*(.+)", line)
        if item and current is not None:
            listed = data.setdefault(current, [])
            if isinstance(listed, list):
                listed.append(item.group(1).strip().strip("'\""))
            continue
        pair = re.fullmatch(r"([A-Za-z0-9_-]+):\s*(.*)", line)
        if not pair:
            return {}, [f"cannot read this frontmatter line: {line!r}"]
        current, value = pair.group(1), pair.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            data[current] = [v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()]
        elif value:
            data[current] = value.strip("'\"")
    return data, []


def check(folder: Path) -> tuple[str, list[Path], list[str], list[str]]:
    """(skill name, files to pack, problems, warnings)."""
    problems: list[str] = []
    warnings: list[str] = []
    manifest = folder / "SKILL.md"
    if not folder.is_dir():
        return "", [], [f"{folder} is not a folder"], []
    if not manifest.is_file():
        return "", [], [f"{folder} has no SKILL.md"], []
    text = manifest.read_text(encoding="utf-8", errors="replace")
    meta, problems = frontmatter(text)
    name = str(meta.get("name") or "").strip()
    description = str(meta.get("description") or "").strip()
    if not name:
        problems.append("the frontmatter needs `name:` (lowercase words joined by '-', e.g. weekly-report)")
    elif not NAME.fullmatch(name) or len(name) > MAX_NAME:
        problems.append(f"name {name!r}: use lowercase letters, digits and single '-' (at most {MAX_NAME})")
    elif name != folder.name:
        problems.append(f"name {name!r} differs from its folder {folder.name!r}; rename one so they match")
    if not description:
        problems.append("the frontmatter needs `description:` saying what the skill does and when to use it")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"the description has {len(description)} characters; keep it under {MAX_DESCRIPTION}")
    elif len(description) < 40:
        warnings.append("the description is very short; say when the skill should be used")
    tools = meta.get("allowed-tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
        problems.append("allowed-tools must be a list of tool names, e.g. [bash, read_file, write_file]")
    unknown = sorted(set(meta) - KNOWN_KEYS)
    if unknown:
        warnings.append(f"frontmatter keys not used by Antler: {', '.join(unknown)}")
    body = text[text.find("\n---", 3) + 4 :].strip() if text.startswith("---") else text
    if len(body) < 80:
        problems.append("SKILL.md has (almost) no instructions below the frontmatter")

    files: list[Path] = []
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        for d in dirs:
            if (Path(root) / d).is_symlink():
                problems.append(
                    f"{(Path(root) / d).relative_to(folder)} is a symlink; copy what it points to"
                )
        for entry in sorted(names):
            path = Path(root) / entry
            relative = path.relative_to(folder)
            if entry in SKIPPED or entry.endswith((".pyc", ".skill")):
                continue
            if path.is_symlink():
                problems.append(f"{relative} is a symlink; copy the file itself into the skill")
                continue
            if not path.is_file():
                problems.append(f"{relative} is not a regular file")
                continue
            data = path.read_bytes()
            total += len(data)
            if b"\0" in data[:8192]:
                problems.append(
                    f"{relative} is a binary file; a skill holds text (Markdown, scripts, templates)"
                )
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                problems.append(f"{relative} is not UTF-8 text")
                continue
            files.append(path)
    nested = [p for p in files if p.name == "SKILL.md" and p != manifest]
    if nested:
        warnings.append(
            f"other SKILL.md files inside ({nested[0].relative_to(folder)}): they stay plain files"
        )
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files; a skill may hold at most {MAX_FILES}")
    if total > MAX_BYTES:
        problems.append(f"{total:,} bytes; a skill may hold at most {MAX_BYTES:,}")
    return name, files, problems, warnings


def pack(folder: Path, name: str, files: list[Path], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}.skill"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, f"{name}/{path.relative_to(folder).as_posix()}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", help="the skill's folder (holding SKILL.md)")
    parser.add_argument("--out-dir", help="where <name>.skill is written, e.g. /mnt/user-data/outputs")
    parser.add_argument("--check", action="store_true", help="only check; write no archive")
    args = parser.parse_args(argv)
    if not args.check and not args.out_dir:
        parser.error("say where the archive goes: --out-dir /mnt/user-data/outputs (or --check)")
    folder = Path(args.folder)
    name, files, problems, warnings = check(folder)
    for warning in warnings:
        print(f"warning: {warning}")
    if problems:
        for problem in problems:
            print(f"problem: {problem}")
        print(f"not packed: {len(problems)} problem(s) to fix first")
        return 1
    print(f"skill {name!r}: {len(files)} file(s) ok")
    for path in files:
        print(f"  {name}/{path.relative_to(folder).as_posix()}")
    if args.check:
        return 0
    target = pack(folder, name, files, Path(args.out_dir))
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
