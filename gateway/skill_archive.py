"""Checking a `.skill` archive (a zip of one skill's folder) before it becomes a custom skill.

The archive is untrusted (anyone an admin takes a file from made it): its paths must stay in one
folder with no links, its sizes and file count are bounded, text files must be text, and its
SKILL.md must pass `skills.loader`'s checks. Every refusal is an HTTP error saying why.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import PurePosixPath

from fastapi import HTTPException

from skills import SKILL_NAME
from skills.loader import MAX_SKILL_MD, BadSkill, SkillMeta, read_meta

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


def read_archive(archive: bytes) -> tuple[str, dict[str, bytes]]:
    """A `.skill` archive checked: its skill's name and files (paths relative to the skill's folder).

    Raises:
        HTTPException: 400 or 413 saying why the archive is refused.
    """
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
    return skill_name, {
        (name if base == "." else str(PurePosixPath(name).relative_to(base))): data
        for name, data in contents.items()
    }


def check_skill_md(text: str, name: str) -> SkillMeta:
    """An edited SKILL.md for skill `name`, checked as an installed one is (400/413 saying why)."""
    if len(text.encode("utf-8")) > MAX_SKILL_MD:
        raise HTTPException(413, f"SKILL.md is over {MAX_SKILL_MD // 1024} KB")
    try:
        meta = read_meta(text)
    except BadSkill as exc:
        raise HTTPException(400, f"SKILL.md: {exc}") from None
    if (meta.name or name).strip() != name:
        raise HTTPException(400, f"SKILL.md names the skill {meta.name!r}; its name stays {name}")
    if not meta.description.strip():
        raise HTTPException(400, "SKILL.md needs a `description:` in its frontmatter")
    return meta
