"""Custom skills in the object store: every version of every custom skill, for every machine.

A custom skill (installed from a `.skill` archive, edited, rolled back) is one zip per version in
the `<prefix>_files` object store::

    skills/<name>/<version>     a zip of the skill's folder (paths relative to it)

`<version>` is `<UTC time in ns, 20 digits>-<first 12 hex of the content's sha256>`, so versions sort
by age and the newest one of a name is its current version. Deleting a skill deletes all its
versions. Custom skills are global (one set for the installation, changed only by admins): the
object store is their only home; `skills.catalog` publishes which version is current and every
process unpacks that one locally (`skills.view`). Public skills ship with the code and are never
stored here.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
import zipfile
from dataclasses import dataclass
from typing import Any

from nats.js.api import ObjectMeta

from bus.files import list_objects

log = logging.getLogger(__name__)

PREFIX = "skills/"
MAX_VERSIONS = 20  # the oldest versions of a skill beyond this many are deleted on each new one
# A fixed timestamp for every member, so the same files always make the same zip (and version).
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class SkillVersion:
    name: str
    version: str
    size: int
    action: str  # install | edit | rollback | import
    by: str  # the user who made it ("" when not known)

    @property
    def key(self) -> str:
        return object_key(self.name, self.version)

    @property
    def created_ns(self) -> int:
        return int(self.version.split("-", 1)[0])


def object_key(name: str, version: str) -> str:
    return f"{PREFIX}{name}/{version}"


def pack(files: dict[str, bytes]) -> bytes:
    """The skill's files (paths relative to its folder) as a zip, the same bytes for the same files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, files[path])
    return buffer.getvalue()


def unpack(archive: bytes) -> dict[str, bytes]:
    """The files of a zip `pack` made (read back from the store, so already checked on the way in)."""
    with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
        return {info.filename: bundle.read(info) for info in bundle.infolist() if not info.is_dir()}


async def put_version(
    bus: Any, name: str, files: dict[str, bytes], *, action: str, by: str = ""
) -> SkillVersion:
    """Store `files` as the newest version of custom skill `name`; older ones beyond
    `MAX_VERSIONS` go. The caller publishes the catalog afterwards (`skills.catalog`)."""
    data = pack(files)
    version = f"{time.time_ns():020d}-{hashlib.sha256(data).hexdigest()[:12]}"
    store = await bus.files()
    key = object_key(name, version)
    headers = {"Content-Type": "application/zip", "Antler-Skill-Action": action, "Antler-Skill-By": by}
    await store.put(key, data, meta=ObjectMeta(name=key, headers=headers))
    for old in (await versions(bus, name))[:-MAX_VERSIONS]:
        await _delete(store, old.key)
    return SkillVersion(name, version, len(data), action, by)


async def _all(bus: Any) -> list[SkillVersion]:
    found = []
    for info in await list_objects(await bus.files(), PREFIX):
        parts = info.name[len(PREFIX) :].split("/")
        if len(parts) != 2 or "-" not in parts[1] or not parts[1].split("-", 1)[0].isdigit():
            continue
        headers = info.headers or {}
        found.append(
            SkillVersion(
                name=parts[0],
                version=parts[1],
                size=info.size or 0,
                action=_header(headers, "Antler-Skill-Action") or "install",
                by=_header(headers, "Antler-Skill-By"),
            )
        )
    return sorted(found, key=lambda v: (v.name, v.version))


def _header(headers: Any, name: str) -> str:
    value = headers.get(name) if hasattr(headers, "get") else None
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value or "")


async def versions(bus: Any, name: str) -> list[SkillVersion]:
    """Every stored version of `name`, oldest first."""
    return [v for v in await _all(bus) if v.name == name]


async def current_versions(bus: Any) -> dict[str, SkillVersion]:
    """The newest version of each custom skill, by name."""
    newest: dict[str, SkillVersion] = {}
    for found in await _all(bus):
        newest[found.name] = found  # sorted oldest first: the last one wins
    return newest


async def read_version(bus: Any, name: str, version: str) -> dict[str, bytes]:
    """The files of one version (raises nats' NotFoundError when it is gone)."""
    found = await (await bus.files()).get(object_key(name, version))
    return unpack(found.data or b"")


async def fetch_archive(bus: Any, name: str, version: str) -> bytes:
    found = await (await bus.files()).get(object_key(name, version))
    return found.data or b""


async def delete_skill(bus: Any, name: str) -> int:
    """Delete every version of custom skill `name`; how many there were."""
    store = await bus.files()
    gone = await versions(bus, name)
    for found in gone:
        await _delete(store, found.key)
    return len(gone)


async def _delete(store: Any, key: str) -> None:
    try:
        await store.delete(key)
    except Exception as exc:  # already gone (another gateway pruned it): nothing to do
        log.info("skill object %s was not deleted: %s", key, exc)
