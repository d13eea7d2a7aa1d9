"""Finding skills: directories with a SKILL.md under `<skills.path>/{public,custom}/`.

A SKILL.md is untrusted input (anyone an admin takes a `.skill` file from wrote it), and every
process that lists skills reads it, so reading one is bounded: the file and its frontmatter have
size caps, YAML aliases are refused (an "alias bomb" of nested `*refs` expands a few hundred bytes
into gigabytes once flattened), and each field must have its type. A skill that fails any of this is
skipped with the reason logged; the others are still listed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictStr, ValidationError

log = logging.getLogger(__name__)

# What a skill's name may be: it is also the slash command that activates it (`/data-analysis`).
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$", re.IGNORECASE)

MAX_SKILL_MD = 256 * 1024  # bytes of a whole SKILL.md (its instructions go into prompts)
MAX_FRONTMATTER = 16 * 1024  # bytes of YAML between the `---` lines
MAX_DESCRIPTION = 1024  # characters; every prompt and the published catalog carry it
MAX_ALLOWED_TOOLS = 100


class BadSkill(ValueError):
    """A SKILL.md that cannot be used; the message says why, for a log line or an HTTP 400."""


class SkillMeta(BaseModel):
    """A SKILL.md's frontmatter, checked: strings where strings belong (a list or a mapping as a
    `description` is refused, not flattened with `str()`), lengths bounded, other keys ignored."""

    model_config = ConfigDict(extra="ignore")

    name: StrictStr | None = Field(None, max_length=64)
    description: StrictStr = Field("", max_length=MAX_DESCRIPTION)
    license: StrictStr | None = Field(None, max_length=200)
    allowed_tools: list[StrictStr] | StrictStr | None = Field(
        None, validation_alias=AliasChoices("allowed-tools", "allowed_tools")
    )

    def tools(self) -> tuple[str, ...] | None:
        """`allowed-tools` as a list, or a string of names separated by commas or spaces."""
        value = self.allowed_tools
        if value is None:
            return None
        names = re.split(r"[,\s]+", value) if isinstance(value, str) else value
        found = tuple(n.strip() for n in names if n.strip())
        if len(found) > MAX_ALLOWED_TOOLS:
            raise BadSkill(f"allowed-tools names {len(found)} tools; at most {MAX_ALLOWED_TOOLS}")
        return found


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
        return strip_frontmatter(read_skill_md(self.path / "SKILL.md"))


class _NoAliases(yaml.SafeLoader):
    """SafeLoader refusing `*alias` nodes: with none, the document is at most as big as its text."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise BadSkill("the frontmatter uses a YAML alias (*name); aliases are not allowed in SKILL.md")
        return super().compose_node(parent, index)


def parse_frontmatter(text: str) -> dict[str, object]:
    """The YAML between the leading `---` lines of a SKILL.md (empty when there is none).

    Raises:
        BadSkill: the frontmatter is too big, uses aliases, nests too deep or is not YAML.
    """
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    block = text[3:end]
    if len(block.encode("utf-8")) > MAX_FRONTMATTER:
        raise BadSkill(f"the frontmatter is over {MAX_FRONTMATTER // 1024} KB")
    try:
        data = yaml.load(block, Loader=_NoAliases)  # a SafeLoader, without aliases
    except yaml.YAMLError as exc:
        raise BadSkill(f"the frontmatter is not valid YAML: {exc}") from None
    except RecursionError:
        raise BadSkill("the frontmatter nests too deep") from None
    return data if isinstance(data, dict) else {}


def read_meta(text: str) -> SkillMeta:
    """The checked frontmatter of a SKILL.md's text (raises `BadSkill` with the reason)."""
    try:
        meta = SkillMeta.model_validate(parse_frontmatter(text))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadSkill(f"frontmatter field {where}: {first['msg']}") from None
    meta.tools()  # refuses an overlong allowed-tools now, not when the skill is used
    return meta


def read_skill_md(path: Path) -> str:
    """A SKILL.md's text, refusing one over `MAX_SKILL_MD` before reading it all (blocking)."""
    with path.open("rb") as file:
        data = file.read(MAX_SKILL_MD + 1)
    if len(data) > MAX_SKILL_MD:
        raise BadSkill(f"SKILL.md is over {MAX_SKILL_MD // 1024} KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadSkill("SKILL.md is not UTF-8 text") from None


def strip_frontmatter(text: str) -> str:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[end + 4 :].lstrip("\n")
    return text


def allowed_tools_of(meta: dict[str, object]) -> tuple[str, ...] | None:
    """`allowed-tools` of parsed frontmatter, checked as `SkillMeta` does (raises `BadSkill`)."""
    try:
        return SkillMeta.model_validate(meta).tools()
    except ValidationError as exc:
        raise BadSkill(f"frontmatter: {exc.errors()[0]['msg']}") from None


def load_skills(root: str | Path) -> list[Skill]:
    """Every skill under `root`, sorted by category and name; unusable ones are logged and skipped."""
    found: list[Skill] = []
    seen: set[str] = set()
    base = Path(root)
    for category in ("public", "custom"):
        for skill_md in sorted((base / category).glob("*/SKILL.md")):
            try:
                meta = read_meta(read_skill_md(skill_md))
            except (OSError, BadSkill) as exc:
                log.warning("skipping skill %s: %s", skill_md, exc)
                continue
            name = (meta.name or skill_md.parent.name).strip()
            if not SKILL_NAME.match(name):
                log.warning(
                    "skipping skill %s: its name %r is not letters, digits, '-' or '_'", skill_md, name
                )
                continue
            if name in seen:
                log.warning("skipping skill %s: another skill is called %s", skill_md, name)
                continue
            seen.add(name)
            found.append(
                Skill(
                    name=name,
                    description=meta.description.strip(),
                    category=category,
                    path=skill_md.parent,
                    license=meta.license or None,
                    allowed_tools=meta.tools(),
                )
            )
    return found
