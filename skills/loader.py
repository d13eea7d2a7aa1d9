"""Finding skills: directories with a SKILL.md under `<skills.path>/{public,custom}/`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import yaml

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    category: str  # public | custom
    path: Path  # the skill's directory on the host
    license: str | None = None

    def container_file(self, container_root: str) -> str:
        """Where the agent reads the SKILL.md inside the sandbox."""
        return f"{container_root.rstrip('/')}/{self.category}/{self.path.name}/SKILL.md"


def parse_frontmatter(text: str) -> dict[str, object]:
    """The YAML between the leading `---` lines of a SKILL.md (empty when there is none)."""
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    data = yaml.safe_load(text[3:end])
    return data if isinstance(data, dict) else {}


def load_skills(root: str | Path) -> list[Skill]:
    """Every skill under `root`, sorted by category and name; unreadable ones are logged and skipped."""
    found: list[Skill] = []
    base = Path(root)
    for category in ("public", "custom"):
        for skill_md in sorted((base / category).glob("*/SKILL.md")):
            try:
                meta = parse_frontmatter(skill_md.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                log.warning("skipping skill %s: %s", skill_md, exc)
                continue
            name = str(meta.get("name") or skill_md.parent.name)
            license_ = meta.get("license")
            found.append(
                Skill(
                    name=name,
                    description=str(meta.get("description") or "").strip(),
                    category=category,
                    path=skill_md.parent,
                    license=str(license_) if license_ else None,
                )
            )
    return found
