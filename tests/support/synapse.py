"""A real Matrix homeserver for the Matrix adapter's tests: Synapse (the `matrix-synapse` package),
started on a loopback port with a fresh SQLite database, registration open (no verification) and
its rate limits raised, stopped at the end; and the people who talk to the bot, through the
Matrix client-server API over HTTP.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

_LIMITS = {"per_second": 1000, "burst_count": 1000}
_txn = itertools.count()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Homeserver:
    url: str
    shared_secret: str  # registers users (admins too) through the admin API


@contextlib.contextmanager
def synapse(workdir: Path, *, startup_timeout: float = 90.0) -> Iterator[Homeserver]:
    """Synapse serving the client API (and the admin API) until the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    base, extra = workdir / "homeserver.yaml", workdir / "test.yaml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "synapse.app.homeserver",
            "--server-name",
            "localhost",
            "--config-path",
            str(base),
            "--generate-config",
            "--report-stats=no",
        ],
        cwd=workdir,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = _free_port()
    settings: dict[str, Any] = {
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "enable_registration": True,
        "enable_registration_without_verification": True,
        "presence": {"enabled": False},
        "rc_message": _LIMITS,
        "rc_registration": _LIMITS,
        "rc_login": {"address": _LIMITS, "account": _LIMITS, "failed_attempts": _LIMITS},
        "rc_joins": {"local": _LIMITS, "remote": _LIMITS},
        "rc_invites": {"per_room": _LIMITS, "per_user": _LIMITS, "per_issuer": _LIMITS},
        "rc_room_creation": _LIMITS,
    }
    extra.write_text(yaml.safe_dump(settings))
    url = f"http://127.0.0.1:{port}"
    with (workdir / "synapse.out").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(base), "-c", str(extra)],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"Synapse exited ({proc.returncode}): {(workdir / 'synapse.out').read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{url}/_matrix/client/versions", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Synapse did not answer within {startup_timeout} s")
            time.sleep(0.2)
        secret = yaml.safe_load(base.read_text())["registration_shared_secret"]
        yield Homeserver(url, secret)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class MatrixUser:
    """Someone on the homeserver, speaking the client-server API (v3) over HTTP."""

    def __init__(self, homeserver: str, user_id: str, token: str, device_id: str, password: str) -> None:
        self.homeserver = homeserver
        self.user_id = user_id
        self.token = token
        self.device_id = device_id
        self.password = password
        self.http = httpx.AsyncClient(
            base_url=f"{homeserver}/_matrix/client/v3",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    @classmethod
    async def register(cls, homeserver: str, name: str | None = None) -> MatrixUser:
        name = name or f"user{uuid.uuid4().hex[:8]}"
        password = uuid.uuid4().hex
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(
                f"{homeserver}/_matrix/client/v3/register",
                json={"username": name, "password": password, "auth": {"type": "m.login.dummy"}},
            )
        answer.raise_for_status()
        body = answer.json()
        return cls(homeserver, body["user_id"], body["access_token"], body["device_id"], password)

    @classmethod
    async def admin(cls, homeserver: Homeserver) -> MatrixUser:
        """A server admin, registered with the shared secret (Synapse's admin registration API)."""
        name, password = f"admin{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        url = f"{homeserver.url}/_synapse/admin/v1/register"
        async with httpx.AsyncClient(timeout=30) as http:
            nonce = (await http.get(url)).json()["nonce"]
            mac = hmac.new(homeserver.shared_secret.encode(), digestmod=hashlib.sha1)
            mac.update(b"\x00".join([nonce.encode(), name.encode(), password.encode(), b"admin"]))
            body = {
                "nonce": nonce,
                "username": name,
                "password": password,
                "admin": True,
                "mac": mac.hexdigest(),
            }
            answer = await http.post(url, json=body)
        answer.raise_for_status()
        made = answer.json()
        return cls(homeserver.url, made["user_id"], made["access_token"], made["device_id"], password)

    async def limit_messages(self, user_id: str, per_second: int, burst: int) -> None:
        """(As an admin) how many messages a second `user_id` may send, beyond the server's setting."""
        await self.http.post(
            f"{self.homeserver}/_synapse/admin/v1/users/{user_id}/override_ratelimit",
            json={"messages_per_second": per_second, "burst_count": burst},
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        answer = await self.http.request(method, path, **kwargs)
        answer.raise_for_status()
        return dict(answer.json())

    async def create_room(self, *invite: str, direct: bool = False, encrypted: bool = False) -> str:
        body: dict[str, Any] = {"preset": "private_chat", "invite": list(invite), "is_direct": direct}
        if encrypted:
            body["initial_state"] = [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
        return str((await self.call("POST", "/createRoom", json=body))["room_id"])

    async def send(self, room: str, content: dict[str, Any], event_type: str = "m.room.message") -> str:
        path = f"/rooms/{room}/send/{event_type}/t{next(_txn)}-{uuid.uuid4().hex[:6]}"
        return str((await self.call("PUT", path, json=content))["event_id"])

    async def say(self, room: str, text: str, **extra: Any) -> str:
        return await self.send(room, {"msgtype": "m.text", "body": text, **extra})

    async def membership(self, room: str, user_id: str) -> str:
        """`join`, `invite`, `leave`...: where `user_id` stands in `room`."""
        return str((await self.call("GET", f"/rooms/{room}/state/m.room.member/{user_id}"))["membership"])

    async def members(self, room: str) -> set[str]:
        joined = await self.call("GET", f"/rooms/{room}/joined_members")
        return set(joined["joined"])

    async def events(self, room: str) -> list[dict[str, Any]]:
        """The room's message events, oldest first."""
        answer = await self.call("GET", f"/rooms/{room}/messages", params={"dir": "b", "limit": 200})
        return [e for e in reversed(answer["chunk"]) if e["type"] in ("m.room.message", "m.room.encrypted")]

    async def upload(self, name: str, data: bytes, content_type: str) -> str:
        answer = await self.http.post(
            f"{self.homeserver}/_matrix/media/v3/upload",
            params={"filename": name},
            content=data,
            headers={"Content-Type": content_type},
        )
        answer.raise_for_status()
        return str(answer.json()["content_uri"])

    async def download(self, mxc: str) -> bytes:
        server, media = mxc.removeprefix("mxc://").split("/", 1)
        answer = await self.http.get(f"{self.homeserver}/_matrix/client/v1/media/download/{server}/{media}")
        answer.raise_for_status()
        return answer.content


def shown(events: list[dict[str, Any]], sender: str) -> list[str]:
    """What a client shows of `sender`'s messages: each with its newest edit applied."""
    texts: dict[str, str] = {}
    for event in events:
        if event["sender"] != sender:
            continue
        content = event["content"]
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace" and relation.get("event_id") in texts:
            texts[relation["event_id"]] = content["m.new_content"]["body"]
        elif relation.get("rel_type") != "m.replace":
            texts[event["event_id"]] = content.get("body", "")
    return list(texts.values())
