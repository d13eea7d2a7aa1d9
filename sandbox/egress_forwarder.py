"""Run inside a sandboxed command's network namespace (by the system's python3, `-I -S -c`): the
egress proxy's door.

The namespace has only its own loopback; the broker's egress proxy (`access.egress_proxy`) listens
on a Unix socket bound into it. Tools want a TCP proxy address (HTTP_PROXY), so this listens on
127.0.0.1:<port> in the namespace and relays each connection to the socket. It binds before the
command starts (no race), then forks: the child relays, quiet and holding none of the command's
output; this process becomes the command (`exec`), so its exit status and signals are the
command's. When the command ends, the namespace's init ends and takes the relay with it.

Arguments: <socket path> <port> <command>. Standard library only.
"""

from __future__ import annotations

import os
import socket
import sys
import threading


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    threading.stack_size(256 * 1024)  # the command's address-space limit counts every thread's stack
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def main() -> None:
    path, port, command = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        try:
            _serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    os.execv("/bin/bash", ["/bin/bash", "-c", command])


if __name__ == "__main__":
    main()
