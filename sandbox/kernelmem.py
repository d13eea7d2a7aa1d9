"""Kernel memory a command's descriptors hold: what its sockets and pipes have queued.

A process can fill thousands of socket pairs (about 200 KB each) or pipes:
memory no process maps, that only a cgroup charges. For the watcher
(`sandbox.memwatch`), this asks the kernel through `sock_diag` netlink for
the buffers of the sockets the command holds (by inode, so a network
namespace shared with the host is no problem): unix sockets' queued bytes
and allocations, TCP and UDP sockets' allocations. The query runs inside
the command's network namespace: the calling thread enters it (`setns`, the
thread's own namespace only) and comes back, where this process may (root;
a broker that is not root cannot, and then sockets are not counted). Pipes'
queued bytes are asked of each pipe (FIONREAD through /proc/<pid>/fd).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import logging
import os
import socket
import struct
import termios
from collections.abc import Iterator

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_UDIAG_SHOW_RQLEN, _UDIAG_SHOW_MEMINFO = 0x10, 0x20
_UNIX_DIAG_RQLEN, _UNIX_DIAG_MEMINFO = 4, 5
_INET_DIAG_SKMEMINFO = 7
# sk_meminfo: rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc, wmem_queued, optmem, backlog, drops
_HELD = (0, 2, 4, 5, 6)


class Namespaces:
    """Entering another process's namespaces from the calling thread, and coming back."""

    def __init__(self) -> None:
        self._setns = None
        with contextlib.suppress(OSError, AttributeError, TypeError):
            self._setns = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).setns
        self.refused: set[str] = set()  # kinds this process may not enter (said once in the log)

    @contextlib.contextmanager
    def entered(self, pid: int, kind: str, flag: int) -> Iterator[bool]:
        """Inside `pid`'s `kind` namespace (True), or where we are if it is ours (True) or we may not
        enter it (False)."""
        if self._setns is None or kind in self.refused:
            yield False
            return
        try:
            target = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            yield False
            return
        home = os.open(f"/proc/thread-self/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(target).st_ino == os.fstat(home).st_ino:
                yield True
                return
            if self._setns(target, flag) != 0:
                self.refused.add(kind)
                log.info("sandbox: a command's %s namespace cannot be entered here; not counted", kind)
                yield False
                return
            try:
                yield True
            finally:
                if self._setns(home, flag) != 0:  # pragma: no cover - back into our own always works
                    raise OSError(ctypes.get_errno(), f"could not return to this thread's {kind} namespace")
        finally:
            os.close(target)
            os.close(home)


def _attributes(data: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            return
        yield kind, data[offset + 4 : offset + length]
        offset += (length + 3) & ~3


def _dump(request: bytes) -> Iterator[bytes]:
    """The payloads of a sock_diag dump's answers."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as sock:
        header = struct.pack(
            "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
        )
        sock.send(header + request)
        while True:
            data = sock.recv(1 << 16)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == _NLMSG_DONE or kind == _NLMSG_ERROR or length < 16:
                    return
                yield data[offset + 16 : offset + length]
                offset += (length + 3) & ~3
            if not data:
                return


def _meminfo(value: bytes) -> int:
    counts = struct.unpack_from(f"={len(value) // 4}I", value)
    return sum(counts[i] for i in _HELD if i < len(counts))


def _unix(inodes: set[int]) -> int:
    total = 0
    request = struct.pack(
        "=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, _UDIAG_SHOW_RQLEN | _UDIAG_SHOW_MEMINFO, 0, 0
    )
    for message in _dump(request):
        if len(message) < 16 or struct.unpack_from("=I", message, 4)[0] not in inodes:
            continue
        for kind, value in _attributes(message, 16):
            if kind == _UNIX_DIAG_MEMINFO:
                total += _meminfo(value)
            elif kind == _UNIX_DIAG_RQLEN and len(value) >= 4:
                total += struct.unpack_from("=I", value)[0]  # queued by a peer that may have closed
    return total


def _inet(inodes: set[int]) -> int:
    total = 0
    for family in (socket.AF_INET, socket.AF_INET6):
        for protocol in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
            request = struct.pack("=BBBBI", family, protocol, 1 << (_INET_DIAG_SKMEMINFO - 1), 0, 0xFFFFFFFF)
            request += bytes(48)  # any address, any port
            for message in _dump(request):
                if len(message) < 72 or struct.unpack_from("=I", message, 68)[0] not in inodes:
                    continue
                for kind, value in _attributes(message, 72):
                    if kind == _INET_DIAG_SKMEMINFO:
                        total += _meminfo(value)
    return total


def socket_buffers(inodes: set[int], inside: int, namespaces: Namespaces) -> int:
    """Bytes the sockets with `inodes` hold in buffers, asked in process `inside`'s network namespace."""
    if not inodes:
        return 0
    with namespaces.entered(inside, "net", CLONE_NEWNET) as entered:
        if not entered:
            return 0
        try:
            return _unix(inodes) + _inet(inodes)
        except OSError:
            return 0


def pipe_contents(paths: list[str]) -> int:
    """Bytes queued in the pipes at `paths` (/proc/<pid>/fd/<n>), each pipe once."""
    total = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            queued = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
            total += struct.unpack("=i", queued)[0]
        except OSError:
            pass
        finally:
            os.close(fd)
    return total
