"""Finding skills: directories with a SKILL.md under `<skills.path>/{public,custom}/`."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

log = logging.getLogger(__name__)

# What a skill's name may be: it is also the slash command that activates it (`/data-analysis`).
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$", re.IGNORECASE)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    category: str  # public | custom
    path: Path  # the skill's directory on the host
    license: str | None = None
    # Frontmatter `allowed-tools`: while the skill is active, only these tools are bound (None: all).
    allowed_tools: tuple[str, ...] | None = None

    def container_file(self, container_root: str) -> str:
        """Where the agent reads the SKILL.md inside the sandbox."""
        return f"{container_root.rstrip('/')}/{self.category}/{self.path.name}/SKILL.md"

    def instructions(self) -> str:
        """The SKILL.md's text after its frontmatter (read from disk: call off the event loop)."""
        return strip_frontmatter((self.path / "SKILL.md").read_text(encoding="utf-8"))


def parse_frontmatter(text: str) -> dict[str, object]:
    """The YAML between the leading `---` lines of a SKILL.md (empty when there is none)."""
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    data = yaml.safe_load(text[3:end])
    return data if isinstance(data, dict) else {}


def strip_frontmatter(text: str) -> str:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[end + 4 :].lstrip("\n")
    return text


def allowed_tools_of(meta: dict[str, object]) -> tuple[str, ...] | None:
    """`allowed-tools` as a list, or a string of names separated by commas or spaces."""
    value = meta.get("allowed-tools", meta.get("allowed_tools"))
    if value is None:
        return None
    if isinstance(value, str):
        names = re.split(r"[,\s]+", value)
    elif isinstance(value, list):
        names = [str(v) for v in value]
    else:
        return None
    return tuple(n.strip() for n in names if n.strip())


def load_skills(root: str | Path) -> list[Skill]:
    """Every skill under `root`, sorted by category and name; unreadable ones are logged and skipped."""
    found: list[Skill] = []
    seen: set[str] = set()
    base = Path(root)
    for category in ("public", "custom"):
        for skill_md in sorted((base / category).glob("*/SKILL.md")):
            try:
                meta = parse_frontmatter(skill_md.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                log.warning("skipping skill %s: %s", skill_md, exc)
                continue
            name = str(meta.get("name") or skill_md.parent.name).strip()
            if not SKILL_NAME.match(name):
                log.warning(
                    "skipping skill %s: its name %r is not letters, digits, '-' or '_'", skill_md, name
                )
                continue
            if name in seen:
                log.warning("skipping skill %s: another skill is called %s", skill_md, name)
                continue
            seen.add(name)
            license_ = meta.get("license")
            found.append(
                Skill(
                    name=name,
                    description=str(meta.get("description") or "").strip(),
                    category=category,
                    path=skill_md.parent,
                    license=str(license_) if license_ else None,
                    allowed_tools=allowed_tools_of(meta),
                )
            )
    return found
