"""SKILL.md loading and installing; public/ holds the bundled skills.

Lands with the skills work; nothing here yet.
"""
