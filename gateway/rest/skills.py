"""Skills: `/api/skills` lists them, switches them on or off and installs `.skill` archives.

Skills are global: public ones ship with the code, custom ones are in the object store
(`skills.store`, every version) and one switch per skill is in extensions_config.json, for every
user and every runner on every machine. So changing them (install, replace, edit, delete, switch)
is an admin's right; other users may list, read and use them. A user who wrote a skill (with the
skill-creator skill) hands the `.skill` file to an admin, or an admin installs it from the thread.
After each change the gateway publishes the catalog (`skills.catalog`), which every process follows.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field, StrictBool, ValidationError
from starlette.datastructures import UploadFile as StarletteUpload

from config import extensions_path, read_raw_extensions, write_extensions_config
from gateway import skill_install
from gateway.answers import skill_info
from gateway.deps import GW, Me
from gateway.rest.mcp import publish_extensions
from gateway.schemas import errors
from gateway.skill_archive import read_archive
from gateway.skill_install import MAX_SKILL_ARCHIVE
from skills import SkillsCatalog, publish_catalog, read_catalog, store
from skills.view import SkillsView

router = APIRouter()

ADMINS_ONLY = (
    "only an admin may {what}: skills are shared by every user "
    "(an admin token, gateway.tokens[].admin, or an admin account)"
)


class SkillInfo(BaseModel):
    name: str
    description: str
    license: str | None = None
    category: str
    enabled: bool
    editable: bool = Field(False, description="A custom skill: an admin may edit or delete it.")
    version: str | None = Field(None, description="A custom skill's current version.")


class SkillsList(BaseModel):
    skills: list[SkillInfo]


class SkillUpdate(BaseModel):
    enabled: StrictBool


class SkillInstalled(BaseModel):
    success: bool
    skill_name: str
    message: str


def _admin(gw: GW, me: str, what: str) -> None:
    if not gw.auth.is_admin(me):
        raise HTTPException(403, ADMINS_ONLY.format(what=what))


async def catalog(gw: GW) -> SkillsCatalog:
    """The published catalog: what every runner offers (published now if nothing is yet)."""
    return await read_catalog(gw.bus) or await publish_skills(gw)


async def _skills(gw: GW) -> list[SkillInfo]:
    return [SkillInfo(**skill_info(s)) for s in (await catalog(gw)).skills]


@router.get("/skills", response_model=SkillsList)
async def list_skills(gw: GW, me: Me) -> SkillsList:
    return SkillsList(skills=await _skills(gw))


@router.get("/skills/{name}", response_model=SkillInfo, responses=errors(404))
async def get_skill(gw: GW, me: Me, name: str) -> SkillInfo:
    for skill in await _skills(gw):
        if skill.name == name:
            return skill
    raise HTTPException(404, f"no skill named {name}")


@router.put("/skills/{name}", response_model=SkillInfo, responses=errors(403, 404, 413))
async def update_skill(gw: GW, me: Me, name: str, body: SkillUpdate) -> SkillInfo:
    """Switch a skill on or off for everyone (admins only)."""
    _admin(gw, me, "switch a skill on or off")
    await get_skill(gw, me, name)
    path = extensions_path()
    raw = await asyncio.to_thread(read_raw_extensions, path)
    raw.setdefault("skills", {})[name] = {"enabled": body.enabled}
    await asyncio.to_thread(write_extensions_config, raw, path)
    await publish_extensions(gw, raw)
    await publish_skills(gw, raw)
    return await get_skill(gw, me, name)


async def publish_skills(gw: GW, raw: dict[str, Any] | None = None) -> SkillsCatalog:
    """Announce the skills as they are now: runners list them from their next run on."""
    if raw is None:
        raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
    return await publish_catalog(gw.bus, view(gw), raw)


def view(gw: GW) -> SkillsView:
    """This gateway's copy of the skills (under its data dir)."""
    return SkillsView(gw.config.bus.data_dir, gw.config.skills.path)


class SkillFromThread(BaseModel):
    thread_id: str
    path: str = Field(description="A .skill file under /mnt/user-data/outputs of that thread.")


_INSTALL_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
            "application/json": {"schema": SkillFromThread.model_json_schema()},
        },
    }
}


@router.post(
    "/skills/install",
    response_model=SkillInstalled,
    responses=errors(400, 403, 404, 409, 413),
    openapi_extra=_INSTALL_BODY,
)
async def install_skill(gw: GW, me: Me, request: Request) -> SkillInstalled:
    """Install a `.skill` archive (admins only): uploaded (multipart `file`), or one the agent
    wrote into a thread's outputs (JSON `{thread_id, path}`, as DeerFlow's UI sends it). A skill of
    the same name in custom/ is replaced."""
    _admin(gw, me, "install or replace a skill")
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, StarletteUpload):
            raise HTTPException(400, "send the .skill archive as the multipart field `file`")
        data = await upload.read(MAX_SKILL_ARCHIVE + 1)
    else:
        try:
            source = SkillFromThread.model_validate_json(await request.body())
        except ValidationError as exc:
            raise HTTPException(
                422, f"send {{thread_id, path}} or a multipart file: {exc.errors()[0]['msg']}"
            ) from None
        data = await _thread_output(gw, me, source)
    if len(data) > MAX_SKILL_ARCHIVE:
        raise HTTPException(413, "a .skill archive may be at most 20 MB")
    name, files = await asyncio.to_thread(read_archive, data)
    await refuse_public_name(gw, name)
    await store.put_version(gw.bus, name, files, action="install", by=me)
    await publish_skills(gw)
    return SkillInstalled(success=True, skill_name=name, message=f"installed skill {name}")


async def refuse_public_name(gw: GW, name: str) -> None:
    if await asyncio.to_thread(skill_install.is_public, gw.config.skills.path, name):
        raise HTTPException(
            409, f"skill not installed: {name} is the name of a built-in skill; choose another name"
        )


async def _thread_output(gw: GW, me: str, source: SkillFromThread) -> bytes:
    await gw.own_thread(source.thread_id, me)
    try:
        return await skill_install.thread_output(gw.bus, me, source.thread_id, source.path)
    except skill_install.NotAnOutput as exc:
        raise HTTPException(400, str(exc)) from None
    except skill_install.NoSuchOutput as exc:
        raise HTTPException(404, str(exc)) from None
