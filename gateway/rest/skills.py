"""Skills: `/api/skills` lists them, switches them on or off and installs `.skill` archives.

Skills are shared: one folder (`skills.path`) and one switch per skill, for every user and every
runner. So changing them (install, replace, switch) is an admin's right; other users may list and
use them. There are no per-user skills: a user who wrote one (with the skill-creator skill) hands
the `.skill` file to an admin.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field, StrictBool, ValidationError
from starlette.datastructures import UploadFile as StarletteUpload

from bus.files import output_key
from bus.layout import OUTPUTS, output_relative
from config import ExtensionsConfig, extensions_path, read_raw_extensions, write_extensions_config
from gateway.deps import GW, Me
from gateway.rest.mcp import publish_extensions
from gateway.schemas import errors
from skills import SKILL_NAME, load_skills, publish_catalog
from skills.loader import MAX_SKILL_MD, BadSkill, read_meta

router = APIRouter()

MAX_SKILL_ARCHIVE = 20 * 1024 * 1024
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


def _skills(gw: GW) -> list[SkillInfo]:
    root = Path(gw.config.skills.path)
    # The file may not exist yet (nothing was ever switched): everything is enabled then.
    extensions = ExtensionsConfig.model_validate(read_raw_extensions(extensions_path()))
    return [
        SkillInfo(
            name=s.name,
            description=s.description,
            license=s.license,
            category=s.category,
            enabled=extensions.skill_enabled(s.name),
        )
        for s in (load_skills(root) if root.is_dir() else [])
    ]


@router.get("/skills", response_model=SkillsList)
async def list_skills(gw: GW, me: Me) -> SkillsList:
    return SkillsList(skills=await asyncio.to_thread(_skills, gw))


@router.get("/skills/{name}", response_model=SkillInfo, responses=errors(404))
async def get_skill(gw: GW, me: Me, name: str) -> SkillInfo:
    for skill in await asyncio.to_thread(_skills, gw):
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


async def publish_skills(gw: GW, raw: dict[str, Any] | None = None) -> None:
    """Announce the skills as they are now: runners list them from their next run on."""
    if raw is None:
        raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
    await publish_catalog(gw.bus, gw.config.skills.path, raw)


MAX_SKILL_FILES = 500
MAX_SKILL_UNPACKED = 100 * 1024 * 1024
# Files a skill keeps as text: they must be UTF-8, without NUL bytes.
TEXT_SUFFIXES = {
    ".md", ".txt", ".py", ".sh", ".js", ".ts", ".json", ".yaml", ".yml", ".toml", ".csv",
    ".html", ".css", ".xml", ".ini", ".cfg", ".sql", ".r", ".rb", ".pl",
}  # fmt: skip
# What reading a member of a damaged or deceitful zip raises: a size or CRC that does not match
# the data (BadZipFile), a broken deflate stream, data ending early, an unknown method, encryption.
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError)


def _refuse(status: int, reason: str) -> HTTPException:
    return HTTPException(status, f"skill not installed: {reason}")


def _read(bundle: zipfile.ZipFile, name: str) -> bytes:
    """One member's bytes; a member whose data does not match its headers is a 400, not a 500."""
    try:
        return bundle.read(name)
    except _UNREADABLE as exc:
        raise _refuse(400, f"{name} cannot be read from the archive: {exc}") from None


def _check_paths(entries: list[zipfile.ZipInfo]) -> None:
    """Refuse paths leaving the skill's folder, links, and a file that is also a folder."""
    files = {i.filename for i in entries}
    for info in entries:
        name = info.filename
        parts = PurePosixPath(name).parts
        if name.startswith(("/", "\\")) or "\\" in name or (len(name) > 1 and name[1] == ":"):
            raise _refuse(400, f"the archive holds an absolute or Windows path: {name}")
        if ".." in parts or any(p in ("", ".") for p in name.split("/")):
            raise _refuse(400, f"the archive holds a path leaving its folder: {name}")
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise _refuse(400, f"the archive holds a symbolic link: {name}")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                raise _refuse(400, f"the archive holds {folder} both as a file and as a folder")


def _install(archive: bytes, skills_root: Path) -> str:
    """Unpack a `.skill` archive into `<skills_root>/custom/<name>`; every refusal says why."""
    try:
        bundle = zipfile.ZipFile(io.BytesIO(archive))
    except (zipfile.BadZipFile, EOFError, ValueError):
        raise _refuse(400, "a .skill file must be a zip archive") from None
    entries = [i for i in bundle.infolist() if not i.is_dir()]
    if len(entries) > MAX_SKILL_FILES:
        raise _refuse(413, f"the archive holds {len(entries)} files; at most {MAX_SKILL_FILES}")
    if sum(i.file_size for i in entries) > MAX_SKILL_UNPACKED:
        raise _refuse(413, "the archive unpacks to more than 100 MB")
    _check_paths(entries)
    names = [i.filename for i in entries]
    manifests = [n for n in names if PurePosixPath(n).name == "SKILL.md" and len(PurePosixPath(n).parts) <= 2]
    if len(manifests) != 1:
        raise _refuse(400, "the archive must hold exactly one SKILL.md, at its root or in one folder")
    base = str(PurePosixPath(manifests[0]).parent)
    outside = [n for n in names if base != "." and not n.startswith(base + "/")]
    if outside:
        raise _refuse(400, f"every file must be in the skill's folder {base}/: {outside[0]} is not")
    contents = {name: _read(bundle, name) for name in names}  # the declared sizes are bounded above
    for name, data in contents.items():
        if PurePosixPath(name).suffix.lower() in TEXT_SUFFIXES:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise _refuse(400, f"{name} should be text but is not UTF-8 (a binary file?)") from None
            if b"\0" in data:
                raise _refuse(400, f"{name} should be text but holds NUL bytes (a binary file?)")
    manifest = contents[manifests[0]]
    if len(manifest) > MAX_SKILL_MD:
        raise _refuse(413, f"SKILL.md is over {MAX_SKILL_MD // 1024} KB")
    try:
        meta = read_meta(manifest.decode("utf-8", errors="replace"))
    except BadSkill as exc:
        raise _refuse(400, f"SKILL.md: {exc}") from None
    skill_name = (meta.name or (base if base != "." else "")).strip()
    if not SKILL_NAME.match(skill_name):
        raise _refuse(400, "SKILL.md needs a `name:` of letters, digits, '-' or '_' (at most 64)")
    if not meta.description.strip():
        raise _refuse(400, "SKILL.md needs a `description:` in its frontmatter")
    if (skills_root / "public" / skill_name).exists() or any(
        s.name.lower() == skill_name.lower() and s.category == "public" for s in load_skills(skills_root)
    ):
        raise _refuse(409, f"{skill_name} is the name of a built-in skill; choose another name")
    custom_root = skills_root / "custom"
    target = custom_root / skill_name
    custom_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=custom_root) as tmp:
        staging = Path(tmp) / skill_name
        for name, data in contents.items():
            relative = PurePosixPath(name) if base == "." else PurePosixPath(name).relative_to(base)
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return skill_name


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
    name = await asyncio.to_thread(_install, data, Path(gw.config.skills.path))
    await publish_skills(gw)
    return SkillInstalled(success=True, skill_name=name, message=f"installed skill {name}")


async def _thread_output(gw: GW, me: str, source: SkillFromThread) -> bytes:
    await gw.own_thread(source.thread_id, me)
    relative = output_relative(source.path)
    if relative is None or ".." in relative.split("/"):
        raise HTTPException(400, f"{source.path} is not a file under {OUTPUTS}")
    try:
        found = await (await gw.bus.files()).get(output_key(me, source.thread_id, relative))
    except Exception:  # not in the object store
        raise HTTPException(404, f"no file {source.path} in thread {source.thread_id}") from None
    return found.data or b""
