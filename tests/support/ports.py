"""Free loopback ports, for servers a test stops and starts again on the same port."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nobody listens on right now (for servers that must come back on the same one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
