"""The sandbox's toolbox: a Python environment with data and document libraries, and the host's Node.js.

Sandboxed commands see only the host's system directories, so the host's bare `python3` is all
they would have. The toolbox is a venv on that same system Python (so it runs inside bwrap), with
the packages of `sandbox.toolbox.python_packages` installed from the package index; every sandbox
gets it read-only at `/opt/toolbox/python`, first on PATH, so `python3` finds the packages. A
Node.js outside the system directories (nvm, /opt) is mounted at `/opt/toolbox/node` the same way.

It is installed once per installation (`make install`, `antler sandbox install`, or `antler up`
when it finds none) under `sandbox.toolbox.path`, else `$ANTLER_TOOLBOX_PATH`, else a place shared
by every data dir of the installation (`shared_root`): `<sys.prefix>/share/antler/toolbox`, beside
the Python Antler runs on (in its venv, so `make install` builds it once for every stack and `make
clean` removes it with the venv), or, when that one is not current and cannot be written (a
system-wide install run by another user), `$XDG_CACHE_HOME/antler/toolbox` (`~/.cache/...`):

    <root>/python/                    the venv
    <root>/python/antler-toolbox.json the stamp: the package list and base Python it was built for
    <root>/.lock                      held while installing (several processes may try at once)

Installing again with the same list and base Python is a stat and a read. A changed list builds a
new venv beside the old one and swaps it in, so a command never sees a half-installed toolbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from config import AppConfig
from sandbox.host import SANDBOX_PATH, SYSTEM_DIRS

log = logging.getLogger(__name__)

TOOLBOX = "/opt/toolbox"
PYTHON_MOUNT = f"{TOOLBOX}/python"
NODE_MOUNT = f"{TOOLBOX}/node"
STAMP = "antler-toolbox.json"
ENV_PATH = "ANTLER_TOOLBOX_PATH"
INSTALL_TIMEOUT = 1800.0


class ToolboxError(RuntimeError):
    """The toolbox could not be installed (no system Python, pip failed); `detail` says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def in_system_dirs(path: str) -> bool:
    """Whether a sandbox sees `path` (after symlinks) as it is: it is under the system directories."""
    real = os.path.realpath(path)
    return any(real.startswith(d + "/") for d in SYSTEM_DIRS)


def system_python() -> str | None:
    """The host's python3 that sandboxes can run (under /usr or /bin), or None."""
    found = shutil.which("python3", path=SANDBOX_PATH)
    return found if found is not None and in_system_dirs(found) else None


def installation_root() -> Path:
    """The toolbox's place in this installation: beside the Python Antler runs on (its venv)."""
    return Path(sys.prefix).resolve() / "share" / "antler" / "toolbox"


def user_root() -> Path:
    """The user's own, for an installation whose place they cannot write."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "antler" / "toolbox"


def shared_root(packages: tuple[str, ...]) -> Path:
    """Where a toolbox with `packages` is when no path is configured: the installation's if it is
    current there or can be built there, else the user's (current, or to be built)."""
    places = [installation_root(), user_root()]
    for root in places:
        if Toolbox(root, packages).current():
            return root
    return next((root for root in places if _writable(root)), places[0])


def _writable(root: Path) -> bool:
    """Whether this user could create or replace the toolbox at `root`."""
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return os.access(existing, os.W_OK | os.X_OK)


@dataclass(frozen=True)
class Toolbox:
    root: Path
    packages: tuple[str, ...]
    enabled: bool = True
    node: bool = True

    shared: bool = False  # in the installation's shared place (no path configured)

    @classmethod
    def from_config(cls, config: AppConfig) -> Toolbox:
        section = config.sandbox.toolbox
        packages = tuple(section.python_packages)
        path = section.path or os.environ.get(ENV_PATH)
        if not path:
            return cls(shared_root(packages), packages, section.enabled, section.node, shared=True)
        return cls(Path(path).expanduser().resolve(), packages, section.enabled, section.node)

    @property
    def python_dir(self) -> Path:
        return self.root / "python"

    def stamp(self, base: str) -> dict[str, object]:
        """What the venv is built for: a new list or another Python (after symlinks) needs a new one."""
        wanted = {"python": os.path.realpath(base), "packages": list(self.packages)}
        key = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]
        return {**wanted, "key": key}

    def installed_stamp(self) -> dict[str, object] | None:
        try:
            found = json.loads((self.python_dir / STAMP).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def ready(self) -> bool:
        """A finished install is here (for whichever list; `current` says whether it is this one)."""
        return self.enabled and (self.python_dir / STAMP).is_file()

    def current(self) -> bool:
        base = system_python()
        found = self.installed_stamp()
        return base is not None and found is not None and found.get("key") == self.stamp(base)["key"]

    def node_home(self) -> Path | None:
        """The prefix of the host's Node.js when a sandbox would not see it otherwise (not in /usr)."""
        if not self.node:
            return None
        found = shutil.which("node")
        if found is None or in_system_dirs(found):
            return None
        home = Path(os.path.realpath(found)).parent.parent
        return home if (home / "bin" / "node").is_file() else None

    def bwrap_args(self) -> list[str]:
        """bwrap options mounting the venv (once installed) and a Node.js outside /usr read-only
        under /opt/toolbox; none when the toolbox is off. Checked per command, so an install made
        while a broker runs is used from the next command on."""
        python = self.ready()
        node = self.node_home() if self.enabled else None
        if not python and node is None:
            return []
        args = ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", TOOLBOX]
        if python:
            args += ["--ro-bind", str(self.python_dir), PYTHON_MOUNT]
        if node is not None:
            args += ["--ro-bind", str(node), NODE_MOUNT]
        return args

    def env(self, path: str, *, isolated: bool) -> dict[str, str]:
        """A command's PATH, the toolbox's Python (then a mounted Node.js) before `path`, and
        matplotlib's settings; without an installed venv only a mounted Node.js is added.

        Args:
            isolated: the command sees the mounts (bwrap), not the host paths (local provider).
        """
        first: list[str] = []
        if isolated and self.enabled and self.node_home() is not None:
            first.append(f"{NODE_MOUNT}/bin")
        if not self.ready():
            return {"PATH": ":".join([*first, path])}
        python = PYTHON_MOUNT if isolated else str(self.python_dir)
        # matplotlib draws to files (no display) and keeps its font cache in the command's /tmp.
        return {
            "PATH": ":".join([f"{python}/bin", *first, path]),
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp/.matplotlib",
        }

    def ensure(self, say: Callable[[str], None] = log.info) -> bool:
        """Install the toolbox unless it is current; True if it was (re)built. Blocking: minutes the
        first time, a stat and a read after.

        Raises:
            ToolboxError: no system Python, or the venv or pip failed (the old toolbox is kept).
        """
        if self.current():
            return False
        base = system_python()
        if base is None:
            raise ToolboxError("no python3 under /usr or /bin: sandboxes have no Python to build on")
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / ".lock"):
            if self.current():  # another process built it while we waited
                return False
            listed = ", ".join(self.packages) or "no packages"
            say(f"installing the sandbox toolbox into {self.python_dir} ({listed}) ...")
            new = self.root / f"python.new-{os.getpid()}"
            shutil.rmtree(new, ignore_errors=True)
            try:
                _build(base, new, self.packages)
                (new / STAMP).write_text(json.dumps(self.stamp(base), indent=1) + "\n", encoding="utf-8")
            except BaseException:
                shutil.rmtree(new, ignore_errors=True)
                raise
            old = self.root / f"python.old-{os.getpid()}"
            if self.python_dir.exists():
                self.python_dir.rename(old)
            new.rename(self.python_dir)
            shutil.rmtree(old, ignore_errors=True)
            # Sandboxed commands run as another user (nobody, when the broker is root): let them read it.
            os.chmod(self.root, 0o755)
            os.chmod(self.python_dir, 0o755)
        say(f"sandbox toolbox ready: {self.python_dir}")
        return True


def _build(base: str, target: Path, packages: tuple[str, ...]) -> None:
    """A venv at `target` on `base`, with `packages` from the package index.

    pip is the one this process runs with (`pip --python`), so the venv needs none of its own; a
    Python without pip gets a venv with pip and uses that.
    """
    own_pip = importlib.util.find_spec("pip") is not None
    _run([base, "-m", "venv", *(["--without-pip"] if own_pip else []), str(target)], "creating the venv")
    if not packages:
        return
    python = str(target / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python] if own_pip else [python, "-m", "pip"]
    options = ["--quiet", "--disable-pip-version-check", "--no-input", "--prefer-binary"]
    _run(
        [*pip, "install", *options, *packages],
        "installing " + " ".join(packages),
    )


def _run(argv: list[str], what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolboxError(f"{what}: {exc}") from None
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise ToolboxError(f"{what} failed (exit {result.returncode}):\n{tail}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
