"""Skills: SKILL.md folders. Public ones ship with the code (`skills.path`/public); custom ones are
versions in the object store (`skills.store`); each machine unpacks both into its data dir
(`skills.view`) as the published catalog (`skills.catalog`) says."""

from skills.catalog import (
    CATALOG_KEY,
    SkillEntry,
    SkillsCatalog,
    SkillsFollower,
    build_catalog,
    follow_catalog,
    publish_catalog,
    read_catalog,
    skills_help,
)
from skills.loader import SKILL_NAME, Skill, load_skills, parse_frontmatter
from skills.slash import slash_command
from skills.view import SkillsView

__all__ = [
    "CATALOG_KEY",
    "SKILL_NAME",
    "Skill",
    "SkillEntry",
    "SkillsCatalog",
    "SkillsFollower",
    "SkillsView",
    "build_catalog",
    "follow_catalog",
    "load_skills",
    "parse_frontmatter",
    "publish_catalog",
    "read_catalog",
    "skills_help",
    "slash_command",
]
