"""What this host's sandbox really holds, found by running commands through it (`antler sandbox check`).

Each row is measured from inside a sandboxed command started exactly as the
broker starts an agent's, not read from the configuration: its namespaces
against this process's, its user, capabilities, no_new_privs and seccomp
mode, the descriptors it finds open (while this process holds an extra
inheritable one, as `antler up`'s log is held), where its /tmp and /dev/shm
live, its network interfaces. The memory and process limits are tried for
real with small limits of their own: a command of several processes
allocating together past 64 MB, one starting more processes than 16.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from config import SandboxConfig
from sandbox.paths import ThreadFS
from sandbox.providers import Outcome, Provider, make_provider

NAMESPACES = ("mnt", "pid", "net", "ipc", "uts", "user", "cgroup")
TRIAL_MEMORY_MB = 64
TRIAL_PROCESSES = 16

_PROBE = r"""
for n in mnt pid net ipc uts user cgroup; do echo "ns.$n=$(readlink /proc/self/ns/$n)"; done
find /proc/$$/fd -mindepth 1 -printf 'fd.%f=%l\n'
echo "uid=$(id -u)"
sed -n 's/^\(CapEff\|NoNewPrivs\|Seccomp\):[[:space:]]*/\1=/p' /proc/self/status
echo "ulimit.nproc=$(ulimit -u)"; echo "ulimit.cpu=$(ulimit -t)"; echo "ulimit.fsize=$(ulimit -f)"
echo "ulimit.as=$(ulimit -v)"
echo "fs.tmp=$(stat -f -c %T /tmp)"; echo "fs.shm=$(stat -f -c %T /dev/shm 2>/dev/null)"
echo "net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
"""
# Processes that all grow at once (tail keeps a line that never ends): together past the trial limit
# long before any of them reaches it alone.
_HOG = "for i in 1 2 3 4; do tail /dev/zero & done; wait; echo survived"
# Python's fork fails at once past the limit (bash's retries for 15 s).
_FORKS = r"""python3 -I -S -c '
import os, time
started = []
for _ in range(48):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started.append(pid)
print(f"started={len(started)}", flush=True)
for pid in started:
    os.kill(pid, 9)
'"""


@dataclass
class Row:
    what: str
    holds: str  # "ok", "WEAK" (holds less than it could) or "FAIL" (does not hold)
    detail: str


def _values(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


async def _in_sandbox(provider: Provider, command: str, timeout: float = 60) -> Outcome:
    """`command` in a throwaway thread directory, as the broker runs an agent's."""
    root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="antler-check-"))
    try:
        fs = ThreadFS(root, "check", "check")
        await asyncio.to_thread(fs.ensure, provider.owner)
        return await provider.run(fs, command, timeout)
    finally:
        await asyncio.to_thread(shutil.rmtree, root, ignore_errors=True)


async def check(config: SandboxConfig, make: Callable[..., Provider] = make_provider) -> list[Row]:
    """The rows of the check, for the sandbox `config` describes."""
    provider = await asyncio.to_thread(make, config)
    trial = await asyncio.to_thread(
        make,
        config.model_copy(update={"memory_mb": TRIAL_MEMORY_MB, "max_processes": TRIAL_PROCESSES}),
    )
    held = os.open("/dev/null", os.O_RDONLY)  # as antler up's log is held: inheritable, not ours to pass
    os.set_inheritable(held, True)
    try:
        probe = await _in_sandbox(provider, _PROBE)
        hog = await _in_sandbox(trial, _HOG, timeout=60)
        forks = await _in_sandbox(trial, _FORKS, timeout=60) if trial.python else None
    finally:
        os.close(held)
        provider.limits.stop()
        trial.limits.stop()
    found = _values(probe.output)
    return [
        _isolation(provider, found),
        _user(found),
        _seccomp(found),
        _descriptors(found),
        _memory(trial, hog, config),
        _processes(trial, forks, config),
        _cpu(provider, found, config),
        _disk(found, config),
        _network(found, config),
    ]


def _isolation(provider: Provider, found: dict[str, str]) -> Row:
    if not provider.isolated:
        return Row("isolation", "FAIL", "local provider: commands run on this machine as this user")
    own = [n for n in NAMESPACES if found.get(f"ns.{n}") and found[f"ns.{n}"] != _own_namespace(n)]
    shared = [n for n in NAMESPACES if n not in own]
    detail = f"bwrap; namespaces of its own: {', '.join(own) or 'none'}"
    if shared:
        detail += f"; shared with the host: {', '.join(shared)}"
    # Under a root broker the command shares the host's user namespace on purpose (it switches to an
    # unprivileged uid and gets a user namespace of its own only for its process count).
    essential = {"mnt", "pid", "ipc", "uts"}
    return Row("isolation", "ok" if essential <= set(own) else "FAIL", detail)


def _own_namespace(name: str) -> str:
    try:
        return os.readlink(f"/proc/self/ns/{name}")
    except OSError:
        return ""


def _user(found: dict[str, str]) -> Row:
    uid, caps, nnp = found.get("uid", "?"), found.get("CapEff", "?"), found.get("NoNewPrivs", "?")
    no_caps = caps.strip("0") == ""
    ok = uid != "0" and no_caps and nnp == "1"
    detail = f"uid {uid}, capabilities {'none' if no_caps else caps}, no_new_privs {nnp}"
    return Row("user", "ok" if ok else "FAIL", detail)


def _seccomp(found: dict[str, str]) -> Row:
    mode = found.get("Seccomp", "?")
    if mode == "0":
        return Row(
            "seccomp",
            "WEAK",
            "no filter: system calls are bounded by the dropped capabilities and the namespaces only",
        )
    return Row("seccomp", "ok", f"mode {mode}")


def _descriptors(found: dict[str, str]) -> Row:
    fds = {int(k[3:]): v for k, v in found.items() if k.startswith("fd.") and k[3:].isdigit()}
    extra = {fd: target for fd, target in fds.items() if fd > 2}
    if extra:
        listed = ", ".join(f"{fd} -> {target}" for fd, target in sorted(extra.items()))
        return Row("descriptors", "FAIL", f"the command holds more than its own pipes: {listed}")
    return Row("descriptors", "ok", "only 0, 1, 2 (its own pipes), though this process held another")


def _memory(trial: Provider, hog: Outcome, config: SandboxConfig) -> Row:
    mechanism = trial.limits.caps["memory"]
    peak = f"; at most {hog.peak_memory / 2**20:.0f} MB held" if hog.peak_memory else ""
    tried = f"4 processes allocating together were stopped at the {TRIAL_MEMORY_MB} MB trial limit{peak}"
    detail = f"{config.memory_mb} MB per command as a whole, by {mechanism}: {tried}"
    if not hog.out_of_memory:
        return Row(
            "memory",
            "FAIL",
            f"a command's processes were not held together (exit {hog.exit_code}): {hog.output[-200:]!r}",
        )
    return Row("memory", "WEAK" if mechanism == "watcher" else "ok", detail)


def _processes(trial: Provider, forks: Outcome | None, config: SandboxConfig) -> Row:
    mechanism = trial.limits.caps["processes"]
    by = "a pids cgroup" if mechanism.startswith("cgroup") else "RLIMIT_NPROC"
    if forks is None:
        return Row("processes", "WEAK", f"{config.max_processes} per command by {by}; not tried (no python3)")
    started = _values(forks.output).get("started", "")
    if not started.isdigit() or int(started) >= TRIAL_PROCESSES:
        return Row("processes", "FAIL", f"{started or '?'} of 48 started under a limit of {TRIAL_PROCESSES}")
    return Row(
        "processes",
        "ok",
        f"{config.max_processes} per command, by {by}: {started} of 48 started under a trial limit of "
        f"{TRIAL_PROCESSES}",
    )


def _cpu(provider: Provider, found: dict[str, str], config: SandboxConfig) -> Row:
    seconds = found.get("ulimit.cpu", "?")
    per_process = f"{seconds}s of CPU per process" if seconds.isdigit() else "no CPU time limit per process"
    if provider.limits.caps["cpu"].startswith("cgroup"):
        return Row("cpu", "ok", f"{config.cpu_cores:g} CPUs per command by cgroup; {per_process}")
    return Row("cpu", "WEAK", f"{per_process} (no cgroup: no share of the cores per command)")


def _disk(found: dict[str, str], config: SandboxConfig) -> Row:
    tmp, shm = found.get("fs.tmp", "?"), found.get("fs.shm", "?")
    fsize = found.get("ulimit.fsize", "?")
    fsize_mb = f"{int(fsize) // 1024} MB" if fsize.isdigit() else fsize
    detail = (
        f"{config.max_thread_mb:g} MB per thread (checked every second); files up to {fsize_mb}; "
        f"/tmp on {tmp}, /dev/shm on {shm or 'nothing'}"
    )
    in_memory = "tmpfs" in (tmp, shm)
    return Row("disk", "WEAK" if in_memory else "ok", detail + ("; tmpfs is memory" if in_memory else ""))


def _network(found: dict[str, str], config: SandboxConfig) -> Row:
    interfaces = found.get("net", "").split()
    if config.allow_network:
        return Row("network", "ok", f"allowed (sandbox.allow_network): {' '.join(interfaces)}")
    if set(interfaces) <= {"lo"}:
        return Row("network", "ok", "none (loopback only)")
    return Row("network", "FAIL", f"interfaces reachable: {' '.join(interfaces)}")


def table(rows: list[Row]) -> str:
    width = max(len(r.what) for r in rows)
    lines = [f"{'WHAT':<{width}}  HOLDS  DETAIL"]
    lines += [f"{r.what:<{width}}  {r.holds:<5}  {r.detail}" for r in rows]
    return "\n".join(lines)
