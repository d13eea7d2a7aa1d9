"""Models, MCP servers, skills and memory: `/api/models`, `/api/mcp`, `/api/skills`, `/api/memory`."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile as StarletteUpload

from bus.files import output_key
from bus.layout import OUTPUTS, output_relative
from bus.records import keys_matching
from config import ExtensionsConfig, extensions_path, read_raw_extensions, write_extensions_config
from gateway.deps import GW, Me
from gateway.schemas import errors
from skills import SKILL_NAME, load_skills, parse_frontmatter, publish_catalog

router = APIRouter()

MAX_SKILL_ARCHIVE = 20 * 1024 * 1024


# ------------------------------------------------------------------ models


class ModelInfo(BaseModel):
    name: str
    display_name: str | None = None
    description: str | None = None
    model: str | None = None
    supports_thinking: bool = False
    supports_reasoning_effort: bool = False
    supports_vision: bool = False


class ModelsList(BaseModel):
    models: list[ModelInfo]


def _model_info(gw: GW, name: str) -> ModelInfo:
    model = gw.config.get_model(name)
    if model is None:
        raise HTTPException(404, f"no model named {name}")
    return ModelInfo(
        name=model.name,
        display_name=model.display_name,
        description=model.description,
        model=model.__dict__.get("model"),  # never resolves $ENV: this is display only
        supports_thinking=model.supports_thinking,
        supports_reasoning_effort=model.supports_reasoning_effort,
        supports_vision=model.supports_vision,
    )


@router.get("/models", response_model=ModelsList)
async def list_models(gw: GW, me: Me) -> ModelsList:
    return ModelsList(models=[_model_info(gw, m.name) for m in gw.config.models])


@router.get("/models/{name}", response_model=ModelInfo, responses=errors(404))
async def get_model(gw: GW, me: Me, name: str) -> ModelInfo:
    return _model_info(gw, name)


# ------------------------------------------------------------------ MCP


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcp_servers: dict[str, dict[str, Any]]


class McpConfigAnswer(McpConfig):
    status: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per server, per runner or executor process: {ok, error, tools}.",
    )


async def publish_extensions(gw: GW, raw: dict[str, Any]) -> None:
    """Every runner and executor follows this KV key: they load the change before their next run."""
    settings = await gw.bus.kv(gw.bus.subjects.settings_bucket)
    await settings.put("extensions", json.dumps(raw).encode())


async def mcp_status(gw: GW) -> dict[str, dict[str, Any]]:
    """Per server, how it started in each process that reported (runners, subagent executors)."""
    bucket = gw.bus.subjects.settings_bucket
    settings = await gw.bus.kv(bucket)
    found: dict[str, dict[str, Any]] = {}
    for key in await keys_matching(gw.bus.js, bucket, "mcp_status.*"):
        try:
            report = json.loads((await settings.get(key)).value or b"{}")
        except Exception:  # gone meanwhile
            continue
        for server, state in report.get("servers", {}).items():
            found.setdefault(server, {})[report.get("process", key)] = state
    return found


_SECRET_KEYS = {"client_secret", "refresh_token", "token", "password", "api_key"}
_saving = asyncio.Lock()  # one read-modify-write of extensions_config.json at a time


def _redacted(value: Any, key: str = "") -> Any:
    """Written secrets shown as `***` to those who may not change them; `$NAME` references stay."""
    if isinstance(value, dict):
        secret_map = key in ("env", "headers")
        return {k: _redacted(v, k if not secret_map else "token") for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, key) for v in value]
    if isinstance(value, str) and key in _SECRET_KEYS and not value.startswith("$"):
        return "***"
    return value


def _admin(gw: GW, me: str) -> None:
    if not gw.auth.is_admin(me):
        raise HTTPException(403, "only an admin token (gateway.tokens[].admin) may change MCP servers")


@router.get("/mcp/config", response_model=McpConfigAnswer)
async def get_mcp(gw: GW, me: Me) -> McpConfigAnswer:
    raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
    servers = raw.get("mcpServers", {})
    if not gw.auth.is_admin(me):
        servers = _redacted(servers)
    return McpConfigAnswer(mcp_servers=servers, status=await mcp_status(gw))


async def _save_mcp(gw: GW, servers: dict[str, dict[str, Any]]) -> McpConfigAnswer:
    path = extensions_path()
    raw = await asyncio.to_thread(read_raw_extensions, path)
    raw["mcpServers"] = servers
    try:
        await asyncio.to_thread(write_extensions_config, raw, path)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HTTPException(422, f"invalid MCP config at {where}: {first['msg']}") from None
    await publish_extensions(gw, raw)
    return McpConfigAnswer(mcp_servers=servers, status=await mcp_status(gw))


@router.put("/mcp/config", response_model=McpConfigAnswer, responses=errors(403, 413))
async def put_mcp(gw: GW, me: Me, body: McpConfig) -> McpConfigAnswer:
    """Replace the MCP servers (admins only); every runner and executor loads them at once."""
    _admin(gw, me)
    async with _saving:
        return await _save_mcp(gw, body.mcp_servers)


class McpPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcp_servers: dict[str, dict[str, Any] | None]


@router.patch("/mcp/config", response_model=McpConfigAnswer, responses=errors(403, 413))
async def patch_mcp(gw: GW, me: Me, body: McpPatch) -> McpConfigAnswer:
    """Change some servers (admins only): each one named replaces its settings (null removes it)."""
    _admin(gw, me)
    async with _saving:
        raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
        servers = dict(raw.get("mcpServers", {}))
        for name, settings in body.mcp_servers.items():
            if settings is None:
                servers.pop(name, None)
            else:
                servers[name] = settings
        return await _save_mcp(gw, servers)


# ------------------------------------------------------------------ skills


class SkillInfo(BaseModel):
    name: str
    description: str
    license: str | None = None
    category: str
    enabled: bool


class SkillsList(BaseModel):
    skills: list[SkillInfo]


class SkillUpdate(BaseModel):
    enabled: bool


class SkillInstalled(BaseModel):
    success: bool
    skill_name: str
    message: str


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


@router.put("/skills/{name}", response_model=SkillInfo, responses=errors(404, 413))
async def update_skill(gw: GW, me: Me, name: str, body: SkillUpdate) -> SkillInfo:
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


def _refuse(status: int, reason: str) -> HTTPException:
    return HTTPException(status, f"skill not installed: {reason}")


def _install(archive: bytes, skills_root: Path) -> str:
    """Unpack a `.skill` archive into `<skills_root>/custom/<name>`; every refusal says why."""
    try:
        bundle = zipfile.ZipFile(io.BytesIO(archive))
    except zipfile.BadZipFile:
        raise _refuse(400, "a .skill file must be a zip archive") from None
    entries = [i for i in bundle.infolist() if not i.is_dir()]
    if len(entries) > MAX_SKILL_FILES:
        raise _refuse(413, f"the archive holds {len(entries)} files; at most {MAX_SKILL_FILES}")
    if sum(i.file_size for i in entries) > MAX_SKILL_UNPACKED:
        raise _refuse(413, "the archive unpacks to more than 100 MB")
    for info in entries:
        name = info.filename
        parts = PurePosixPath(name).parts
        if name.startswith(("/", "\\")) or "\\" in name or (len(name) > 1 and name[1] == ":"):
            raise _refuse(400, f"the archive holds an absolute or Windows path: {name}")
        if ".." in parts or any(p in ("", ".") for p in name.split("/")):
            raise _refuse(400, f"the archive holds a path leaving its folder: {name}")
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise _refuse(400, f"the archive holds a symbolic link: {name}")
    names = [i.filename for i in entries]
    manifests = [n for n in names if PurePosixPath(n).name == "SKILL.md" and len(PurePosixPath(n).parts) <= 2]
    if len(manifests) != 1:
        raise _refuse(400, "the archive must hold exactly one SKILL.md, at its root or in one folder")
    base = str(PurePosixPath(manifests[0]).parent)
    outside = [n for n in names if base != "." and not n.startswith(base + "/")]
    if outside:
        raise _refuse(400, f"every file must be in the skill's folder {base}/: {outside[0]} is not")
    for name in names:
        if PurePosixPath(name).suffix.lower() in TEXT_SUFFIXES:
            data = bundle.read(name)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise _refuse(400, f"{name} should be text but is not UTF-8 (a binary file?)") from None
            if b"\0" in data:
                raise _refuse(400, f"{name} should be text but holds NUL bytes (a binary file?)")
    try:
        meta = parse_frontmatter(bundle.read(manifests[0]).decode("utf-8"))
    except Exception as exc:  # YAML errors
        raise _refuse(400, f"SKILL.md's frontmatter is not valid YAML: {exc}") from None
    skill_name = str(meta.get("name") or (base if base != "." else "")).strip()
    if not SKILL_NAME.match(skill_name):
        raise _refuse(400, "SKILL.md needs a `name:` of letters, digits, '-' or '_' (at most 64)")
    if not meta.get("description"):
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
        for name in names:
            relative = PurePosixPath(name) if base == "." else PurePosixPath(name).relative_to(base)
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(bundle.read(name))
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
    responses=errors(400, 404, 413),
    openapi_extra=_INSTALL_BODY,
)
async def install_skill(gw: GW, me: Me, request: Request) -> SkillInstalled:
    """Install a `.skill` archive: uploaded (multipart `file`), or one the agent wrote into a
    thread's outputs (JSON `{thread_id, path}`, as DeerFlow's UI sends it)."""
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
