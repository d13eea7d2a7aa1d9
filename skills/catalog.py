"""The skills catalog on the bus: which skills exist and which are enabled, for every process.

Skills live on disk (`skills.path`/{public,custom}); whether each is enabled lives in
extensions_config.json `skills`. Whoever changes either (the gateway: a switch, an install)
publishes the catalog to KV `<prefix>_settings` key `skills`, with a new generation. Runners and
subagent executors follow that key: the next run lists what it says (`SkillsFollower`), and reads
the disk again when the generation changed. The router reads it for `/help` and slash commands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bus.watch import follow_key
from config import AppConfig, ExtensionsConfig, extensions_path, read_raw_extensions
from skills.loader import Skill, load_skills

log = logging.getLogger(__name__)

CATALOG_KEY = "skills"


class SkillEntry(BaseModel):
    name: str
    description: str
    category: str
    license: str | None = None
    enabled: bool = True
    allowed_tools: list[str] | None = None


class SkillsCatalog(BaseModel):
    generation: int = Field(description="Changes whenever a skill was installed, removed or switched.")
    skills: list[SkillEntry] = Field(default_factory=list)

    def get(self, name: str) -> SkillEntry | None:
        """The skill called `name`: any case, `_` for `-` (Telegram commands cannot hold `-`)."""
        wanted = command_name(name)
        return next((s for s in self.skills if command_name(s.name) == wanted), None)

    def enabled(self) -> list[SkillEntry]:
        return [s for s in self.skills if s.enabled]


def scan(root: str | Path, raw_extensions: dict[str, Any]) -> SkillsCatalog:
    """The catalog of the skills on disk under `root` (blocking: call in a thread)."""
    path = Path(root)
    extensions = ExtensionsConfig.model_validate(raw_extensions or {})
    return SkillsCatalog(
        generation=time.time_ns(),
        skills=[
            SkillEntry(
                name=s.name,
                description=s.description,
                category=s.category,
                license=s.license,
                enabled=extensions.skill_enabled(s.name),
                allowed_tools=list(s.allowed_tools) if s.allowed_tools is not None else None,
            )
            for s in (load_skills(path) if path.is_dir() else [])
        ],
    )


def encoded(bus: Any, catalog: SkillsCatalog) -> bytes:
    """The catalog as the KV value, fitting in one bus message.

    Each entry is bounded (see `skills.loader`), but a folder of thousands of skills is not: the
    skills that do not fit are left out with a warning, so the catalog is still published (a value
    over the server's max_payload would fail the gateway's start with MaxPayloadError).
    """
    limit = int(getattr(bus.nc, "max_payload", 0) or 1024 * 1024) - 4096  # headers and KV framing
    data = catalog.model_dump_json().encode()
    if len(data) <= limit:
        return data
    kept = list(catalog.skills)
    while kept and len(data) > limit:
        kept = kept[: len(kept) * 3 // 4]
        data = catalog.model_copy(update={"skills": kept}).model_dump_json().encode()
    log.warning(
        "the skills catalog is over the bus' message size: %d of %d skills are listed",
        len(kept),
        len(catalog.skills),
    )
    return data


async def publish_catalog(bus: Any, root: str | Path, raw_extensions: dict[str, Any]) -> SkillsCatalog:
    """Scan the disk and announce the result: every follower uses it from its next run on."""
    catalog = await asyncio.to_thread(scan, root, raw_extensions)
    settings = await bus.kv(bus.subjects.settings_bucket)
    await settings.put(CATALOG_KEY, encoded(bus, catalog))
    return catalog


async def read_catalog(bus: Any) -> SkillsCatalog | None:
    """The published catalog (None: nothing published yet)."""
    settings = await bus.kv(bus.subjects.settings_bucket)
    try:
        entry = await settings.get(CATALOG_KEY)
    except Exception:  # no such key yet
        return None
    try:
        return SkillsCatalog.model_validate_json(entry.value or b"{}")
    except ValueError:
        log.warning("the published skills catalog is unreadable; ignored")
        return None


class SkillsFollower:
    """A process's view of the skills: the published catalog, and the skills on this disk it names.

    Nothing published (no gateway has run yet): this process scans its own disk and publishes
    that, so the router and others have a catalog too.
    """

    def __init__(self, bus: Any, config: AppConfig) -> None:
        self.bus = bus
        self.root = Path(config.skills.path)
        self.catalog: SkillsCatalog | None = None
        self._loaded_generation: int | None = None
        self._on_disk: dict[str, Skill] = {}
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        settings = await self.bus.kv(self.bus.subjects.settings_bucket)
        self.catalog = await read_catalog(self.bus)
        if self.catalog is None:
            raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
            catalog = await asyncio.to_thread(scan, self.root, raw)
            try:
                await settings.create(CATALOG_KEY, encoded(self.bus, catalog))
                self.catalog = catalog
            except Exception:  # another process published first: take theirs
                self.catalog = await read_catalog(self.bus) or catalog
        self._watch = asyncio.create_task(follow_key(settings, CATALOG_KEY, self._changed, "skills"))

    async def _changed(self, value: bytes) -> None:
        self.catalog = SkillsCatalog.model_validate_json(value)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)

    async def enabled(self, only: list[str] | None = None) -> list[Skill]:
        """The enabled skills (of `only`, when given), as found on this disk."""
        catalog = self.catalog
        if catalog is None:
            return []
        if catalog.generation != self._loaded_generation:
            found = await asyncio.to_thread(load_skills, self.root) if self.root.is_dir() else []
            self._on_disk = {s.name.lower(): s for s in found}
            self._loaded_generation = catalog.generation
        wanted = {n.lower() for n in only} if only is not None else None
        return [
            skill
            for entry in catalog.enabled()
            if (skill := self._on_disk.get(entry.name.lower())) is not None
            and (wanted is None or entry.name.lower() in wanted)
        ]

    async def find(self, name: str) -> Skill | None:
        """The enabled skill called `name` (as `SkillsCatalog.get` matches), if there is one."""
        return next((s for s in await self.enabled() if command_name(s.name) == command_name(name)), None)


def command_name(name: str) -> str:
    return name.lower().replace("_", "-")


def skills_help(catalog: SkillsCatalog | None, spell: Callable[[str], str] = str) -> str:
    """Lines for /help: the enabled skills as slash commands, each name as `spell` writes it (the
    way the chat's platform lets it be tapped)."""
    entries = catalog.enabled() if catalog is not None else []
    if not entries:
        return ""
    lines = [f"/{spell(s.name)} - {_first_sentence(s.description)}" for s in entries]
    return "Skills (start a message with one to use it):\n" + "\n".join(lines)


def _first_sentence(text: str, limit: int = 90) -> str:
    sentence = text.split(". ", 1)[0].strip().rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"
