"""Skills: SKILL.md folders under `skills.path`/{public,custom}; public/ holds the bundled ones."""

from skills.catalog import (
    CATALOG_KEY,
    SkillEntry,
    SkillsCatalog,
    SkillsFollower,
    publish_catalog,
    read_catalog,
    skills_help,
)
from skills.loader import SKILL_NAME, Skill, load_skills, parse_frontmatter
from skills.slash import slash_command

__all__ = [
    "CATALOG_KEY",
    "SKILL_NAME",
    "Skill",
    "SkillEntry",
    "SkillsCatalog",
    "SkillsFollower",
    "load_skills",
    "parse_frontmatter",
    "publish_catalog",
    "read_catalog",
    "skills_help",
    "slash_command",
]
