"""Models, MCP servers and skills, as the gateway's `/api/models`, `/api/mcp/config`, `/api/skills`.

Models come from the config (display fields only, never a key). MCP servers and skill switches live
in extensions_config.json beside config.yaml; a change is written there and published to the
`settings` bucket (key `extensions`), which every runner and subagent executor follows, and a
skills change publishes the catalog (`skills.catalog`) the runners offer from their next run on.
Custom skills are versions in the object store (`skills.store`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from antler.client._base import Connected
from antler.client.errors import InvalidRequest, NotFound
from bus import Bus
from config import read_raw_extensions, write_extensions_config
from config.loader import CONFIG_ENV, EXTENSIONS_ENV, EXTENSIONS_FILE
from gateway import answers, extensions, skill_install
from skills import SkillsCatalog, SkillsView, publish_catalog, read_catalog, store

_saving = asyncio.Lock()  # one read-modify-write of extensions_config.json at a time (per loop)


class Settings(Connected):
    """Models, MCP servers and skills."""

    # ------------------------------------------------------------------ models

    def _model_info(self, name: str) -> dict[str, Any] | None:
        return answers.model_info(self.config, name)

    async def list_models(self) -> dict[str, Any]:
        """`{"models": [{name, display_name, description, model, supports_*}]}`: what a turn may pick."""
        return {"models": [self._model_info(m.name) for m in self.config.models]}

    async def get_model(self, name: str) -> dict[str, Any] | None:
        """One model's description, or None when no model has that name."""
        return self._model_info(name)

    # ------------------------------------------------------------------ MCP

    @property
    def extensions_file(self) -> Path:
        """extensions_config.json: `$ANTLER_EXTENSIONS_CONFIG_PATH`, else beside config.yaml (as
        `antler up` run in its directory finds it), else in the working directory."""
        if os.environ.get(EXTENSIONS_ENV):
            return Path(os.environ[EXTENSIONS_ENV])
        if self.config_file is not None:
            return self.config_file.parent / EXTENSIONS_FILE
        return Path.cwd() / EXTENSIONS_FILE

    @property
    def config_file(self) -> Path | None:
        if self._config_path is not None:
            return self._config_path
        if os.environ.get(CONFIG_ENV):
            return Path(os.environ[CONFIG_ENV]).resolve()
        local = Path.cwd() / "config.yaml"
        return local.resolve() if local.is_file() else None

    async def _raw_extensions(self) -> dict[str, Any]:
        return await asyncio.to_thread(read_raw_extensions, self.extensions_file)

    async def get_mcp_config(self) -> dict[str, Any]:
        """`{"mcp_servers": {name: settings}, "status": {server: {process: {ok, error, tools}}}}`."""
        raw = await self._raw_extensions()
        status = await self._guarded("read MCP status", extensions.mcp_status)
        return {"mcp_servers": raw.get("mcpServers", {}), "status": status}

    async def update_mcp_config(self, mcp_servers: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Replace the MCP servers; every runner and executor loads them before its next run.

        Raises:
            InvalidRequest: a server's settings are not valid (the message names where).
        """
        if not isinstance(mcp_servers, dict) or not all(isinstance(v, dict) for v in mcp_servers.values()):
            raise InvalidRequest("mcp_servers: a dict of server name to its settings (a dict)")

        async def save(bus: Bus) -> dict[str, Any]:
            async with _saving:
                raw = await self._raw_extensions()
                raw["mcpServers"] = mcp_servers
                await self._write_extensions(raw)
                await extensions.publish(bus, raw)
            return {"mcp_servers": mcp_servers, "status": await extensions.mcp_status(bus)}

        return await self._guarded("update the MCP servers", save)

    async def _write_extensions(self, raw: dict[str, Any]) -> None:
        from pydantic import ValidationError

        try:
            await asyncio.to_thread(write_extensions_config, raw, self.extensions_file)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidRequest(f"invalid extensions config at {where}: {first['msg']}") from None

    # ------------------------------------------------------------------ skills

    def _skills_view(self) -> SkillsView:
        return SkillsView(self.config.bus.data_dir, self.config.skills.path)

    async def _catalog(self, bus: Bus, raw: dict[str, Any] | None = None) -> SkillsCatalog:
        found = None if raw is not None else await read_catalog(bus)
        if found is not None:
            return found
        return await publish_catalog(bus, self._skills_view(), raw or await self._raw_extensions())

    async def _skills(self) -> list[dict[str, Any]]:
        catalog = await self._guarded("read the skills catalog", self._catalog)
        return [answers.skill_info(s) for s in catalog.skills]

    async def list_skills(self, enabled_only: bool = False) -> dict[str, Any]:
        """`{"skills": [{name, description, license, category, enabled, editable, version}]}`."""
        skills = await self._skills()
        return {"skills": [s for s in skills if s["enabled"] or not enabled_only]}

    async def get_skill(self, name: str) -> dict[str, Any] | None:
        """One skill, or None when none has that name."""
        return next((s for s in await self._skills() if s["name"] == name), None)

    async def update_skill(self, name: str, *, enabled: bool) -> dict[str, Any]:
        """Switch a skill on or off for every user; the runners offer the change from their next run.

        Raises:
            NotFound: no skill has that name.
        """
        if not isinstance(enabled, bool):
            raise InvalidRequest(f"enabled: True or False, not {enabled!r}")
        if await self.get_skill(name) is None:
            raise NotFound(f"no skill named {name}")

        async def switch(bus: Bus) -> None:
            async with _saving:
                raw = await self._raw_extensions()
                raw.setdefault("skills", {})[name] = {"enabled": enabled}
                await self._write_extensions(raw)
                await extensions.publish(bus, raw)
                await self._catalog(bus, raw)

        await self._guarded("switch a skill", switch)
        found = await self.get_skill(name)
        assert found is not None
        return found

    async def install_skill(
        self,
        skill_path: str | os.PathLike[str] | None = None,
        *,
        thread_id: str | None = None,
        path: str | None = None,
    ) -> dict[str, Any]:
        """Install a `.skill` archive (a zip of one skill's folder) as a custom skill; one of the
        same name is replaced. `{"success": True, "skill_name", "message"}`.

        The archive is a local file (`install_skill("x.skill")`), or one the agent wrote into a
        thread's outputs, as the web UI installs it (`install_skill(thread_id=..., path=
        "/mnt/user-data/outputs/x.skill")`; `outputs/x.skill` is taken for that too).

        Raises:
            FileNotFoundError: no file at `skill_path` (or at `path` in the thread's outputs).
            InvalidRequest: not a usable archive (the message says why), a built-in skill's name,
                both or neither of `skill_path` and `thread_id`/`path`.
            NotFound: the thread is not the user's.
        """
        if (skill_path is None) == (thread_id is None and path is None):
            raise InvalidRequest("install_skill: give skill_path (a local file), or thread_id and path")
        if skill_path is not None:
            data = await asyncio.to_thread(_read_archive_file, skill_path)
        else:
            data = await self._thread_output(thread_id, path)
        name, files = await asyncio.to_thread(_checked_archive, data)
        if await asyncio.to_thread(skill_install.is_public, self.config.skills.path, name):
            raise InvalidRequest(
                f"skill not installed: {name} is the name of a built-in skill; choose another"
            )

        async def install(bus: Bus) -> None:
            await store.put_version(bus, name, files, action="install", by=self.user_id)
            await self._catalog(bus, await self._raw_extensions())

        await self._guarded("install a skill", install)
        return {"success": True, "skill_name": name, "message": f"installed skill {name}"}

    async def _thread_output(self, thread_id: str | None, path: str | None) -> bytes:
        if thread_id is None or not isinstance(path, str) or not path:
            raise InvalidRequest("install_skill: a thread's archive needs both thread_id and path")
        await self._own_thread(thread_id)
        virtual = path if path.startswith("/") else f"/mnt/user-data/{path.removeprefix('mnt/user-data/')}"

        async def read(bus: Bus) -> bytes:
            try:
                return await skill_install.thread_output(bus, self.user_id, thread_id, virtual)
            except skill_install.NotAnOutput as exc:
                raise InvalidRequest(f"path: {exc}") from None
            except skill_install.NoSuchOutput as exc:
                raise _NoOutput(str(exc)) from None

        return await self._guarded("read the thread's skill archive", read)


class _NoOutput(NotFound, FileNotFoundError):
    """No such file in the thread's outputs."""


def _read_archive_file(skill_path: str | os.PathLike[str]) -> bytes:
    path = Path(skill_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"skill_path: no file at {path}")
    return path.read_bytes()


def _checked_archive(data: bytes) -> tuple[str, dict[str, bytes]]:
    """The gateway's own checks of an untrusted archive (`gateway.skill_archive`), its refusals ours."""
    from fastapi import HTTPException

    from gateway.skill_archive import read_archive

    if len(data) > skill_install.MAX_SKILL_ARCHIVE:
        raise InvalidRequest("a .skill archive may be at most 20 MB")
    try:
        return read_archive(data)
    except HTTPException as exc:
        raise InvalidRequest(f"not a usable .skill archive: {exc.detail}") from None
