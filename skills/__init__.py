"""Skills: SKILL.md folders under `skills.path`/{public,custom}; public/ holds the bundled ones."""

from skills.loader import Skill, load_skills, parse_frontmatter

__all__ = ["Skill", "load_skills", "parse_frontmatter"]
