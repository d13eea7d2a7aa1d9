"""The skills catalog on the bus: which skills exist, which are enabled, and each custom skill's
current version, for every process on every machine.

Public skills ship with the code (`skills.path`/public); custom skills live in the object store,
every version (`skills.store`); whether each is enabled lives in extensions_config.json `skills`.
Whoever changes any of it (the gateway: a switch, an install, an edit, a deletion) publishes the
catalog to KV `<prefix>_settings` key `skills`, with a new generation (compare-and-set, so two
gateways publishing at once both end up in it). Runners, subagent executors and sandbox brokers
follow that key (`SkillsFollower`): on a new generation they bring their machine's copy up to date
(`skills.view`, fetching only the custom versions it lacks) and list what the catalog says from
it. The router reads it for `/help` and slash commands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from pydantic import BaseModel, Field

from bus.tasks import cancel_and_wait
from bus.watch import follow_key
from config import AppConfig, ExtensionsConfig, extensions_path, read_raw_extensions
from skills import store
from skills.loader import Skill, load_skills
from skills.view import SkillsView

log = logging.getLogger(__name__)

CATALOG_KEY = "skills"


class SkillEntry(BaseModel):
    name: str
    description: str
    category: str
    license: str | None = None
    enabled: bool = True
    allowed_tools: list[str] | None = None
    version: str | None = Field(None, description="A custom skill's current version in the object store.")


class SkillsCatalog(BaseModel):
    generation: int = Field(description="Changes whenever a skill was installed, removed or switched.")
    skills: list[SkillEntry] = Field(default_factory=list)

    def get(self, name: str) -> SkillEntry | None:
        """The skill called `name`: any case, `_` for `-` (Telegram commands cannot hold `-`)."""
        wanted = command_name(name)
        return next((s for s in self.skills if command_name(s.name) == wanted), None)

    def enabled(self) -> list[SkillEntry]:
        return [s for s in self.skills if s.enabled]

    def custom_versions(self) -> dict[str, str]:
        """name -> version of every custom skill: what each machine's copy must hold."""
        return {s.name: s.version for s in self.skills if s.category == "custom" and s.version}


def scan(
    root: str | Path, raw_extensions: dict[str, Any], versions: dict[str, str] | None = None
) -> SkillsCatalog:
    """The catalog of the skills on disk under `root` (blocking: call in a thread); `versions`
    names the custom skills to list (the others in custom/ are left out) and their versions."""
    path = Path(root)
    extensions = ExtensionsConfig.model_validate(raw_extensions or {})
    found = load_skills(path) if path.is_dir() else []
    if versions is not None:
        found = [s for s in found if s.category == "public" or s.path.name in versions]
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
                version=(versions or {}).get(s.path.name) if s.category == "custom" else None,
            )
            for s in found
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


async def build_catalog(bus: Any, view: SkillsView, raw_extensions: dict[str, Any]) -> SkillsCatalog:
    """The catalog as it is now: the code's public skills and the object store's current custom
    versions, brought into this machine's copy and read from there."""
    versions = {name: found.version for name, found in (await store.current_versions(bus)).items()}
    await view.sync(bus, versions)
    return await asyncio.to_thread(scan, view.root, raw_extensions, versions)


async def publish_catalog(bus: Any, view: SkillsView, raw_extensions: dict[str, Any]) -> SkillsCatalog:
    """Build the catalog and announce it: every follower uses it from its next run on.

    Compare-and-set on the key: when another gateway published between our read and our write,
    we build again (its change is then in the store we list), so no change is lost to a race.
    """
    settings = await bus.kv(bus.subjects.settings_bucket)
    for _ in range(20):
        try:
            revision: int | None = (await settings.get(CATALOG_KEY)).revision
        except KeyNotFoundError:
            revision = None
        catalog = await build_catalog(bus, view, raw_extensions)
        try:
            if revision is None:
                await settings.create(CATALOG_KEY, encoded(bus, catalog))
            else:
                await settings.update(CATALOG_KEY, encoded(bus, catalog), last=revision)
            return catalog
        except KeyWrongLastSequenceError:
            continue
    raise RuntimeError("the skills catalog kept changing while it was published; try again")


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


async def follow_catalog(
    bus: Any, on_catalog: Callable[[SkillsCatalog | None], Awaitable[None]], what: str
) -> None:
    """Call `on_catalog` with the published catalog (None: none yet, so the built-in commands at
    least), then with each new one; runs until cancelled. `what` names the caller in the log: a first
    call that fails (a chat platform or the bus out of reach) is logged, and the next catalog tries
    again."""
    try:
        await on_catalog(await read_catalog(bus))
    except Exception as exc:
        log.warning("%s: not offered now (%s); the next skills catalog tries again", what, exc)
    settings = await bus.kv(bus.subjects.settings_bucket)

    async def changed(value: bytes) -> None:
        await on_catalog(SkillsCatalog.model_validate_json(value))

    await follow_key(settings, CATALOG_KEY, changed, what)


class SkillsFollower:
    """A process's view of the skills: the published catalog, and its skills in this machine's copy.

    Each new generation of the catalog brings the copy up to date (`skills.view`) before anything
    is listed from it. Nothing published yet (no gateway has run): a process that may write the
    catalog (`publish_if_missing`, runners and executors) builds and publishes one, so the router
    and others have a catalog too; one that may only read it (a sandbox broker) waits for one.
    """

    def __init__(self, bus: Any, config: AppConfig, *, publish_if_missing: bool = True) -> None:
        self.bus = bus
        self.view = SkillsView(config.bus.data_dir, config.skills.path)
        self.publish_if_missing = publish_if_missing
        self.catalog: SkillsCatalog | None = None
        self._loaded_generation: int | None = None
        self._on_disk: dict[str, Skill] = {}
        self._loading = asyncio.Lock()
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        settings = await self.bus.kv(self.bus.subjects.settings_bucket)
        self.catalog = await read_catalog(self.bus)
        if self.catalog is None and self.publish_if_missing:
            raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
            catalog = await build_catalog(self.bus, self.view, raw)
            try:
                await settings.create(CATALOG_KEY, encoded(self.bus, catalog))
                self.catalog = catalog
            except Exception:  # another process published first: take theirs
                self.catalog = await read_catalog(self.bus) or catalog
        elif self.catalog is None:  # none to follow yet: the code's public skills, at least
            await self.view.sync(self.bus, {})
        self._watch = asyncio.create_task(follow_key(settings, CATALOG_KEY, self._changed, "skills"))

    async def _changed(self, value: bytes) -> None:
        catalog = SkillsCatalog.model_validate_json(value)
        if self.catalog is None or catalog.generation != self.catalog.generation:
            self.catalog = catalog
        await self._load()  # now, so the copy is ready before a run or a command needs it

    async def refresh(self) -> None:
        """Read the catalog now (not when the watch brings it) and bring the copy up to date: for
        a command that uses a skill a runner has just been told of."""
        latest = await read_catalog(self.bus)
        if latest is not None and (self.catalog is None or latest.generation != self.catalog.generation):
            self.catalog = latest
        await self._load()

    async def _load(self) -> dict[str, Skill]:
        catalog = self.catalog
        if catalog is None:
            return {}
        async with self._loading:
            if catalog.generation != self._loaded_generation:
                try:
                    await self.view.sync(self.bus, catalog.custom_versions())
                    synced = True
                except Exception as exc:  # the store unreachable: use the copy as it is, retry next time
                    log.warning("skills: this machine's copy was not brought up to date: %s", exc)
                    synced = False
                found = await asyncio.to_thread(load_skills, self.view.root)
                self._on_disk = {s.name.lower(): s for s in found}
                if synced:
                    self._loaded_generation = catalog.generation
            return self._on_disk

    async def close(self) -> None:
        if self._watch is not None:
            await cancel_and_wait(self._watch)

    async def enabled(self, only: list[str] | None = None) -> list[Skill]:
        """The enabled skills (of `only`, when given), as found in this machine's copy."""
        catalog = self.catalog
        if catalog is None:
            return []
        on_disk = await self._load()
        wanted = {n.lower() for n in only} if only is not None else None
        return [
            skill
            for entry in catalog.enabled()
            if (skill := on_disk.get(entry.name.lower())) is not None
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
