"""Reading and changing one skill: DeerFlow's `/api/skills/custom/...` routes, over the object store.

    GET    /skills/custom                    the custom skills
    GET    /skills/custom/{name}             a skill with its SKILL.md (any skill, any signed-in user)
    PUT    /skills/custom/{name}             a new SKILL.md: a new version (admins)
    DELETE /skills/custom/{name}             every version gone, on every machine (admins)
    GET    /skills/custom/{name}/history     its versions, oldest first (admins)
    POST   /skills/custom/{name}/rollback    undo the change at history[history_index] (admins)

Reading a skill is open to every user (DeerFlow: admins only), since every user's runs read the
same SKILL.md at /mnt/skills anyway. Each change stores a version (`skills.store`) and publishes
the catalog, so every runner, executor and sandbox broker takes it before its next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, HTTPException
from nats.js.errors import NotFoundError
from pydantic import BaseModel, Field

from gateway.deps import GW, Me
from gateway.rest.skills import SkillInfo, SkillsList, _admin, _skills, publish_skills
from gateway.schemas import errors
from gateway.skill_archive import check_skill_md
from skills import load_skills, store
from skills.loader import read_skill_md

log = logging.getLogger(__name__)
router = APIRouter()


class SkillContent(SkillInfo):
    content: str = Field(description="The skill's SKILL.md, frontmatter included.")


class SkillEdit(BaseModel):
    content: str = Field(description="The new SKILL.md (its `name:` must stay the skill's name).")


class SkillVersionInfo(BaseModel):
    version: str
    action: str = Field(description="install, edit, rollback or import")
    author: str = Field(description="The user who made this version ('' when not known).")
    ts: str = Field(description="When, ISO 8601 UTC.")
    size: int
    current: bool


class SkillHistory(BaseModel):
    history: list[SkillVersionInfo]


class SkillRollback(BaseModel):
    history_index: int = Field(
        -1, description="Undo the change at this index of the history (default: the latest one)."
    )


class Deleted(BaseModel):
    success: bool


async def _info(gw: GW, name: str) -> SkillInfo:
    found = next((s for s in await _skills(gw) if s.name == name), None)
    if found is None:
        raise HTTPException(404, f"no skill named {name}")
    return found


async def _custom(gw: GW, name: str) -> SkillInfo:
    found = await _info(gw, name)
    if found.category != "custom" or found.version is None:
        raise HTTPException(400, f"{name} is a built-in skill: it ships with Antler and cannot be changed")
    return found


async def _files(gw: GW, name: str, version: str) -> dict[str, bytes]:
    try:
        return await store.read_version(gw.bus, name, version)
    except NotFoundError:
        raise HTTPException(409, f"version {version} of {name} is gone (deleted meanwhile?)") from None


@router.get("/skills/custom", response_model=SkillsList)
async def list_custom_skills(gw: GW, me: Me) -> SkillsList:
    return SkillsList(skills=[s for s in await _skills(gw) if s.category == "custom"])


@router.get("/skills/custom/{name}", response_model=SkillContent, responses=errors(404))
async def get_skill_content(gw: GW, me: Me, name: str) -> SkillContent:
    info = await _info(gw, name)
    if info.category == "custom" and info.version is not None:
        text = (await _files(gw, name, info.version)).get("SKILL.md", b"").decode("utf-8", "replace")
    else:
        text = await asyncio.to_thread(_public_text, gw.config.skills.path, name)
    return SkillContent(**info.model_dump(), content=text)


def _public_text(skills_path: str, name: str) -> str:
    found = next((s for s in load_skills(skills_path) if s.name == name and s.category == "public"), None)
    if found is None:
        raise HTTPException(404, f"no skill named {name}")
    return read_skill_md(found.path / "SKILL.md")


@router.put("/skills/custom/{name}", response_model=SkillContent, responses=errors(400, 403, 404, 413))
async def edit_skill(gw: GW, me: Me, name: str, body: SkillEdit) -> SkillContent:
    """Replace a custom skill's SKILL.md (its other files stay): a new version, for everyone."""
    _admin(gw, me, "edit a skill")
    info = await _custom(gw, name)
    check_skill_md(body.content, name)
    files = await _files(gw, name, info.version or "")
    files["SKILL.md"] = body.content.encode("utf-8")
    await store.put_version(gw.bus, name, files, action="edit", by=me)
    await publish_skills(gw)
    return await get_skill_content(gw, me, name)


@router.delete("/skills/custom/{name}", response_model=Deleted, responses=errors(400, 403, 404))
async def delete_skill(gw: GW, me: Me, name: str) -> Deleted:
    """Delete a custom skill with all its versions; every machine's copy drops it."""
    _admin(gw, me, "delete a skill")
    await _custom(gw, name)
    await store.delete_skill(gw.bus, name)
    await asyncio.to_thread(_forget_on_disk, gw.config.skills.path, name)
    await publish_skills(gw)
    log.info("skill %s deleted by %s", name, me)
    return Deleted(success=True)


@router.get("/skills/custom/{name}/history", response_model=SkillHistory, responses=errors(403, 404))
async def skill_history(gw: GW, me: Me, name: str) -> SkillHistory:
    _admin(gw, me, "read a skill's history")
    info = await _custom(gw, name)
    return SkillHistory(history=[_version_info(v, info.version) for v in await store.versions(gw.bus, name)])


def _version_info(found: store.SkillVersion, current: str | None) -> SkillVersionInfo:
    when = datetime.fromtimestamp(found.created_ns / 1e9, UTC).isoformat()
    return SkillVersionInfo(
        version=found.version,
        action=found.action,
        author=found.by,
        ts=when,
        size=found.size,
        current=found.version == current,
    )


@router.post("/skills/custom/{name}/rollback", response_model=SkillContent, responses=errors(400, 403, 404))
async def rollback_skill(gw: GW, me: Me, name: str, body: SkillRollback) -> SkillContent:
    """Undo the change at `history_index`: the version before it becomes the newest again."""
    _admin(gw, me, "roll a skill back")
    await _custom(gw, name)
    history = await store.versions(gw.bus, name)
    try:
        changed = history[body.history_index]
    except IndexError:
        raise HTTPException(400, "history_index is out of range") from None
    at = history.index(changed)
    if at == 0:
        raise HTTPException(400, "the first version has no earlier one to go back to")
    files = await _files(gw, name, history[at - 1].version)
    await store.put_version(gw.bus, name, files, action="rollback", by=me)
    await publish_skills(gw)
    return await get_skill_content(gw, me, name)


def _forget_on_disk(skills_path: str, name: str) -> None:
    """A skill installed before skills were on the bus may still be in `skills.path`/custom: it
    goes too, or the next start would import it again."""
    folder = Path(skills_path) / "custom" / name
    if folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)


async def import_disk_skills(gw: GW) -> None:
    """Move skills installed before skills were on the bus (`skills.path`/custom/<name>, this
    machine's disk) into the object store, once: a name the store already holds is left alone."""
    found = await asyncio.to_thread(
        lambda: [s for s in load_skills(gw.config.skills.path) if s.category == "custom"]
    )
    if not found:
        return
    stored = await store.current_versions(gw.bus)
    public = {
        s.name.lower()
        for s in await asyncio.to_thread(load_skills, gw.config.skills.path)
        if s.category == "public"
    }
    for skill in found:
        if skill.name in stored or skill.name.lower() in public:
            continue
        files = await asyncio.to_thread(_read_folder, skill.path)
        if files is None:
            continue
        await store.put_version(gw.bus, skill.name, files, action="import")
        log.info("skill %s imported from %s into the object store", skill.name, skill.path)


def _read_folder(folder: Path) -> dict[str, bytes] | None:
    files: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            log.warning("skill folder %s holds a link (%s); not imported", folder, path)
            return None
        if path.is_file() and "__pycache__" not in path.parts:
            with contextlib.suppress(OSError):
                files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return files if "SKILL.md" in files else None
