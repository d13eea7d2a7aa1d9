"""Where commands run: `bwrap` (isolated) or `local` (a plain subprocess, for development).

bwrap gives each command fresh namespaces (no network unless allowed, its own
PID namespace), a read-only view of the system's programs and libraries (`/usr`,
`/bin`, `/lib*`, `/sbin`; not `/opt`, `/home`, `/var` or the rest of the host),
of the few `/etc` files programs read at start-up (users and groups are made up
for the sandbox), the thread's directories at their virtual paths, a `/tmp` and
`/dev/shm` of the command's own on the thread's disk, and resource limits (set
by `prlimit`, under an unprivileged uid when the broker runs as root, so the
process limit holds). The process limit is per command: each one
gets a user namespace of its own, since the kernel counts a uid's processes per
user namespace, and commands all run as one uid. Both providers give commands an allowlisted
environment (`hygiene.command_env`), never the broker's, and no descriptor of
the broker's but the command's own pipes (`sandbox.spawn`); they hold a
command's processes to its memory limit together (`sandbox.limits`) and kill
the whole process group at the wall-clock timeout.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import shutil
from pathlib import Path
from typing import Literal

from bus.layout import USER_DATA
from bus.messages import EgressPolicy
from config import SandboxConfig
from sandbox.egress import proxied, refusal_warnings
from sandbox.host import SANDBOX_PATH, SANDBOX_UID, SYSTEM_DIRS, bwrap_works, own_process_count
from sandbox.hygiene import command_env
from sandbox.paths import Mount, ThreadFS
from sandbox.provider_base import Outcome, Provider, configured_environment
from sandbox.toolbox import Toolbox

log = logging.getLogger(__name__)

__all__ = [
    "BwrapProvider",
    "LocalProvider",
    "Outcome",
    "Provider",
    "bwrap_works",
    "configured_environment",
    "make_provider",
]

_SYSTEM_DIRS = SYSTEM_DIRS
# Of /etc only what programs read to start and behave: the dynamic linker's cache, Debian's
# alternatives (awk, editor, ...), name service and locale settings, the time zone, interpreter
# configuration, MIME and magic databases. Not the rest, which holds the host's own configuration
# and credentials (pip.conf, gitconfig, ssh, the application's files, ...).
_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "nsswitch.conf",
    "hosts",
    "protocols",
    "services",
    "localtime",
    "timezone",
    "locale.alias",
    "os-release",
    "debian_version",
    "mime.types",
    "magic",
    "magic.mime",
    "fonts",
    "perl",
    "python3",
    "python3.*",
)
# Only with network access: resolver configuration and TLS trust roots (through the egress proxy,
# which resolves names itself, only the roots).
_ETC_TLS = ("ssl/certs", "ssl/openssl.cnf", "ca-certificates")
_ETC_NETWORK = ("resolv.conf", "host.conf", "gai.conf", *_ETC_TLS)
# A command's network: none (its own empty namespace), proxy (that, and the egress proxy's door), all.
Network = Literal["none", "proxy", "all"]


class LocalProvider(Provider):
    """No isolation: virtual paths are rewritten to host paths in the command. Development only."""

    name = "local"

    async def run(
        self,
        fs: ThreadFS,
        command: str,
        timeout: float,
        *,
        output_limit: int | None = None,
        grow_files: bool = True,
        egress: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> Outcome:
        # Not isolated: the command has this machine's network whatever the policy (documented).
        async with self.command_tmp(fs) as tmp:
            env = command_env(
                {
                    **self.environment,  # first: what the provider sets itself wins
                    "HOME": str(fs.workspace),
                    "TMPDIR": str(tmp),
                    **self.toolbox_env(os.environ.get("PATH", SANDBOX_PATH)),
                }
            )
            if "MPLCONFIGDIR" in env:
                env["MPLCONFIGDIR"] = str(tmp / ".matplotlib")  # the command's own /tmp
            outcome = await self._spawn(
                ["/bin/bash", "-c", fs.translate_command(command)],
                cwd=fs.workspace,
                env=env,
                timeout=timeout,
                output_limit=output_limit,
            )
        outcome.output = fs.untranslate(outcome.output)
        return outcome


class BwrapProvider(Provider):
    name = "bwrap"
    isolated = True
    tmpfs = ("/dev",)  # bwrap's own /dev: in memory (the command's /tmp and /dev/shm are on disk)

    def __init__(self, config: SandboxConfig, toolbox: Toolbox | None = None) -> None:
        super().__init__(config, toolbox)
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.prlimit = shutil.which("prlimit")
        self.setpriv = shutil.which("setpriv") or "setpriv"
        self.unshare = own_process_count() if self.owner is not None else None

    @property
    def owner(self) -> tuple[int, int] | None:
        return (SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 and shutil.which("setpriv") else None

    @property
    def _identity(self) -> tuple[int, int]:
        return self.owner if self.owner is not None else (os.getuid(), os.getgid())

    def identity_files(self) -> dict[str, bytes]:
        """/etc/passwd and /etc/group made up for the sandbox: its own user, root and nobody."""
        uid, gid = self._identity
        users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
        groups = ["root:x:0:"]
        users.append(f"sandbox:x:{uid}:{gid}:sandbox:{USER_DATA}/workspace:/bin/bash")
        groups.append(f"sandbox:x:{gid}:")
        if uid != 65534:
            users.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
        if gid != 65534:
            groups.append("nogroup:x:65534:")
        return {
            "/etc/passwd": ("\n".join(users) + "\n").encode(),
            "/etc/group": ("\n".join(groups) + "\n").encode(),
        }

    def etc_args(self, files: dict[str, int], network: Network = "none") -> list[str]:
        """A read-only /etc holding only `_ETC` (with `network`, `_ETC_NETWORK`: all of it with the
        host's network, only the TLS roots through the proxy) plus `files` (path -> readable fd)."""
        args = ["--tmpfs", "/etc"]
        extra = {"all": _ETC_NETWORK, "proxy": _ETC_TLS, "none": ()}[network]
        names = [*_ETC, *extra]
        made = {"/etc"}
        for path in sorted({found for name in names for found in glob.glob(os.path.join("/etc", name))}):
            parent = os.path.dirname(path)
            if parent not in made:  # bwrap would make it root-only
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
            target = os.path.realpath(path)
            if os.path.islink(path) and any(
                target == d or target.startswith(d + "/") for d in _SYSTEM_DIRS if os.path.isdir(d)
            ):
                args += ["--symlink", os.readlink(path), path]  # kept a link: some read where it points
            elif os.path.exists(path):
                args += ["--ro-bind", path, path]
        for path, fd in files.items():
            args += ["--file", str(fd), path]
        return [*args, "--remount-ro", "/etc"]

    def argv(
        self,
        fs: ThreadFS,
        command: str,
        files: dict[str, int] | None = None,
        *,
        tmp: Path | None = None,
        grow_files: bool = True,
        network: Network | None = None,
        extra: list[str] | None = None,
    ) -> tuple[list[str], list[str]]:
        """bwrap's options and the command it runs; `files` are extra /etc files (path -> fd to read
        them from), `tmp` the host directory the command sees as /tmp (else an unsized tmpfs),
        `network` the command's (default: `sandbox.allow_network`'s), `extra` more bwrap options."""
        c = self.config
        if network is None:
            network = "all" if c.allow_network else "none"
        args = [self.bwrap, "--die-with-parent", "--new-session"]
        if self.owner is not None:
            # As root, no user namespace: inside it only uid 0 would exist, and we switch to another.
            args += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            if network != "all":
                args.append("--unshare-net")
        else:
            args.append("--unshare-all")
            if network == "all":
                args.append("--share-net")
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        args += self.etc_args(files or {}, network)
        args += self.toolbox.bwrap_args() if self.toolbox is not None else []
        args += extra or []
        args += ["--proc", "/proc", "--dev", "/dev"]
        if tmp is not None:  # POSIX shared memory and semaphores (multiprocessing) live in /dev/shm
            args += ["--bind", str(tmp), "/tmp", "--bind", str(tmp), "/dev/shm"]
        else:
            args += ["--perms", "1777", "--tmpfs", "/tmp"]
        # Mount points reachable by the unprivileged user (bwrap would make them root-only).
        args += ["--perms", "0755", "--dir", "/mnt", "--perms", "0755", "--dir", USER_DATA]
        for mount in fs.mounts:
            if mount.virtual != USER_DATA and mount.host.is_dir():
                args += ["--bind" if mount.writable else "--ro-bind", str(mount.host), mount.virtual]
        args += ["--chdir", f"{USER_DATA}/workspace"]
        options, args = args[1:], []
        if self.owner is not None:
            # bwrap runs as root to reach any host path; the command itself never does: it becomes
            # an unprivileged user with no capabilities, so the process limit below holds.
            uid, gid = self.owner
            args += [
                self.setpriv,
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
            ]
            if self.unshare:
                # Its own user namespace (mapping only that uid), so the process limit counts this
                # command's processes, not those of every command running as the sandbox uid.
                args += [self.unshare, "--user", f"--map-user={uid}", f"--map-group={gid}", "--"]
        if self.prlimit:
            args += [
                self.prlimit,
                f"--cpu={c.cpu_seconds}",
                f"--as={c.memory_mb * 1024 * 1024}",
                f"--nproc={c.max_processes}",
                f"--fsize={c.max_file_size_mb * 1024 * 1024 if grow_files else 0}",
                "--",
            ]
        return options, [*args, "/bin/bash", "-c", command]

    @property
    def python(self) -> str | None:
        found = shutil.which("python3", path=SANDBOX_PATH)
        if found is None:
            return None
        real = os.path.realpath(found)
        # Only one the sandbox can see: the system's directories are all it has of the host.
        return found if any(real.startswith(d + "/") for d in _SYSTEM_DIRS) else None

    def root_of(self, mount: Mount) -> str:
        return mount.virtual

    async def run(
        self,
        fs: ThreadFS,
        command: str,
        timeout: float,
        *,
        output_limit: int | None = None,
        grow_files: bool = True,
        egress: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> Outcome:
        policy = self.egress_of(egress)
        async with self.command_tmp(fs) as tmp:
            run = functools.partial(
                self._run, fs, timeout=timeout, tmp=tmp, output_limit=output_limit, grow_files=grow_files
            )
            if policy.mode != "allowlist":
                return await run(command, network=policy.mode)
            python = self.python
            if python is None:  # nothing inside to open the proxy's door with: no network at all
                outcome = await run(command, network="none")
                outcome.notes.append(
                    "network: the sandbox has no python3 to reach the egress proxy with, so this command "
                    "had no network"
                )
                return outcome
            async with proxied(policy, command, python, run_id=run_id) as door:
                outcome = await run(door.command, network="proxy", extra=door.bwrap_args, proxy_env=door.env)
            outcome.notes += refusal_warnings(door)
            return outcome

    async def _run(
        self,
        fs: ThreadFS,
        command: str,
        *,
        timeout: float,
        tmp: Path,
        output_limit: int | None,
        grow_files: bool,
        network: Network,
        extra: list[str] | None = None,
        proxy_env: dict[str, str] | None = None,
    ) -> Outcome:
        env = command_env(
            {
                **self.environment,  # first: what the provider sets itself wins
                "HOME": f"{USER_DATA}/workspace",
                "TMPDIR": "/tmp",
                **self.toolbox_env(SANDBOX_PATH),
                "SHELL": "/bin/bash",
                "USER": "sandbox",
                "LOGNAME": "sandbox",
                **(proxy_env or {}),
            }
        )
        files: dict[str, int] = {}
        try:
            for path, content in self.identity_files().items():
                # bwrap copies them from pipes; a few hundred bytes fit in a pipe's buffer.
                read_end, write_end = os.pipe()
                files[path] = read_end
                try:
                    os.write(write_end, content)
                finally:
                    os.close(write_end)
            options, argv = self.argv(
                fs, command, files, tmp=tmp, grow_files=grow_files, network=network, extra=extra
            )
            # The options name host paths; bwrap reads them from a pipe, so they are not on the
            # command line, which every process in the sandbox can read (/proc/1/cmdline).
            read_end, write_end = os.pipe()
            files["--args"] = read_end
            try:
                os.write(write_end, b"".join(o.encode() + b"\0" for o in options))
            finally:
                os.close(write_end)
            return await self._spawn(
                [self.bwrap, "--args", str(read_end), *argv],
                cwd=Path("/"),
                env=env,
                timeout=timeout,
                pass_fds=tuple(files.values()),
                output_limit=output_limit,
            )
        finally:
            for fd in files.values():
                os.close(fd)


def make_provider(config: SandboxConfig, toolbox: Toolbox | None = None) -> Provider:
    """The configured provider, offering `toolbox` when it is installed; `auto` picks bwrap when it
    works here, else local (with a warning)."""
    if config.provider == "bwrap" or (config.provider == "auto" and bwrap_works()):
        return BwrapProvider(config, toolbox)
    log.warning(
        "sandbox: commands run WITHOUT isolation (local provider): they can read and change this machine, "
        "and reach its network whatever the egress policy says. "
        "Install bubblewrap (apt-get install bubblewrap) for isolated execution."
    )
    return LocalProvider(config, toolbox)
