"""Tools from MCP servers, for the agents of one process (runner or subagent executor).

The servers are those enabled in extensions_config.json `mcpServers`, as the
gateway last published it to KV `<prefix>_settings` (key `extensions`; this
process's own file when no gateway ever did). Every process watches that key,
so a change made through the gateway's `/api/mcp/config` reaches every runner
on every machine before its next run: no restart, no polling of files.

Each server gets one long-lived session (stdio: one process, started with a
secret-scrubbed environment plus the server's own `env`; http/sse: one
connection, with OAuth tokens fetched and refreshed when configured), opened
by `langchain-mcp-adapters`. A server that does not start or answer is
reported in `status()` (and KV `<prefix>_settings` key `mcp_status.<process>`) and left
out: the agent runs without its tools, never fails because of it. Tool names
that collide (between servers, or with the agent's own tools) are prefixed
with their server's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from langchain_core.tools import BaseTool

from agents.tools.mcp_stderr import StderrTail
from bus import Bus, safe_token
from bus.messages import utcnow
from bus.tasks import wait_for
from bus.watch import follow_key
from config import extensions_from, extensions_path, read_raw_extensions
from config.environment import scrubbed_env

log = logging.getLogger(__name__)

_instances = itertools.count(1)

# The MCP client libraries take seconds to import on a busy machine: loaded on a worker thread the
# first time a server is started, never on the event loop (other runs, heartbeats and, where one
# process hosts several components, the gateway go on meanwhile).
_MCP_MODULES = (
    "mcp",
    "mcp.client.stdio",
    "langchain_mcp_adapters.sessions",
    "langchain_mcp_adapters.tools",
)
_modules_loaded = False


def _import_mcp_modules() -> None:
    for name in _MCP_MODULES:
        importlib.import_module(name)


async def _load_mcp_modules() -> None:
    global _modules_loaded
    if not _modules_loaded:  # two first starts at once import on two threads: the import lock serialises them
        await asyncio.to_thread(_import_mcp_modules)
        _modules_loaded = True


EXTENSIONS_KEY = "extensions"
STATUS_KEY = "mcp_status"
START_TIMEOUT = 30.0  # seconds a server gets to start and list its tools
CALL_TIMEOUT = 300.0  # seconds one tool call may take before it fails
RETIRE_AFTER = 60.0  # seconds a replaced server stays open for runs still using its tools
RESTART_AFTER = 10.0  # seconds before a server whose session ended is started again
PING_EVERY = 15.0  # seconds between checks that a server still answers


class McpOAuth(httpx.Auth):
    """OAuth for an HTTP/SSE MCP server: a token from `token_url` (client_credentials or
    refresh_token), sent as `Authorization`, fetched again shortly before it expires or when
    the server says 401."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.token_url = str(settings["token_url"])
        self.grant_type = str(settings.get("grant_type") or "client_credentials")
        self.settings = settings
        self.skew = float(settings.get("refresh_skew_seconds") or 60)
        self.refresh_token: str | None = settings.get("refresh_token")
        self._token: tuple[str, str, float] | None = None  # (type, token, expires at, monotonic)
        self._lock = asyncio.Lock()

    async def _fresh(self, force: bool = False) -> tuple[str, str]:
        async with self._lock:
            if self._token is not None and not force and time.monotonic() < self._token[2] - self.skew:
                return self._token[0], self._token[1]
            form = {"grant_type": self.grant_type}
            for key in ("client_id", "client_secret", "scope", "audience"):
                if self.settings.get(key):
                    form[key] = str(self.settings[key])
            if self.grant_type == "refresh_token":
                form["refresh_token"] = self.refresh_token or ""
            async with httpx.AsyncClient(timeout=30) as client:
                response = await client.post(self.token_url, data=form)
            if response.status_code >= 400:
                raise httpx.HTTPStatusError(
                    f"the token endpoint refused ({response.status_code}): {response.text[:200]}",
                    request=response.request,
                    response=response,
                )
            body = response.json()
            token_type = str(body.get("token_type") or "Bearer")
            lifetime = float(body.get("expires_in") or 3600)
            self._token = (token_type, str(body["access_token"]), time.monotonic() + lifetime)
            if body.get("refresh_token"):
                self.refresh_token = str(body["refresh_token"])
            return token_type, str(body["access_token"])

    async def async_auth_flow(self, request: httpx.Request) -> Any:
        token_type, token = await self._fresh()
        request.headers["Authorization"] = f"{token_type.capitalize()} {token}"
        response = yield request
        if response.status_code == 401:
            token_type, token = await self._fresh(force=True)
            request.headers["Authorization"] = f"{token_type.capitalize()} {token}"
            yield request


def connection(name: str, server: Any) -> dict[str, Any]:
    """The langchain-mcp-adapters connection for one configured server (`$NAME` values resolved).

    Raises:
        ValueError: the server's settings cannot make a connection.
        config.MissingEnvError: a `$NAME` it uses is not set.
    """
    kind = server.type
    session = {"read_timeout_seconds": timedelta(seconds=CALL_TIMEOUT)}  # a stalled server fails the call
    if kind == "stdio":
        if not server.command:
            raise ValueError("a stdio server needs a command")
        own = {k: str(v) for k, v in (server.resolved("env") or {}).items()}
        env = {**scrubbed_env(), **_no_braces(own, "env")}
        return {
            "transport": "stdio",
            "command": server.command,
            "args": list(server.args),
            "env": env,
            "session_kwargs": session,
        }
    if not server.url:
        raise ValueError(f"a {kind} server needs a url")
    found: dict[str, Any] = {
        "transport": "sse" if kind == "sse" else "streamable_http",
        "url": server.url,
        "headers": _no_braces({k: str(v) for k, v in (server.resolved("headers") or {}).items()}, "headers"),
        "session_kwargs": session,
    }
    oauth = server.resolved("oauth")
    if oauth and oauth.get("enabled", True):
        found["auth"] = McpOAuth(oauth)
    return found


def _no_braces(values: dict[str, str], where: str) -> dict[str, str]:
    """langchain-mcp-adapters expands `${NAME}` from this process's environment (its secrets):
    only `$NAME`, resolved by us for the names the config writes, is allowed."""
    for key, value in values.items():
        if "${" in value:
            raise ValueError(f"{where}.{key}: write $NAME for an environment value, not ${{NAME}}")
    return values


@dataclass
class ServerStatus:
    ok: bool
    error: str | None = None
    tools: list[str] = field(default_factory=list)


class _Server:
    """One server's session, held open by a task of its own (MCP sessions must close in the task
    that opened them)."""

    def __init__(self, name: str, conn: dict[str, Any], spec: str, on_end: Any) -> None:
        self.name = name
        self.conn = conn
        self.spec = spec  # the server's settings as configured: unchanged settings keep the session
        self.ended = False
        self.tools: list[BaseTool] = []
        self._on_end = on_end
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self.stderr: StderrTail | None = None
        self._task = asyncio.create_task(self._hold(), name=f"mcp:{name}")

    async def _session(self, stack: contextlib.AsyncExitStack) -> Any:
        """The MCP session; a stdio server's stderr goes to `self.stderr`, not Antler's terminal."""
        from langchain_mcp_adapters.sessions import create_session

        if self.conn.get("transport") != "stdio":
            return await stack.enter_async_context(create_session(self.conn))  # type: ignore[arg-type]  # a Connection dict
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        self.stderr = await StderrTail.open(self.name)  # closed when _hold ends, after a failure is read
        params = StdioServerParameters(
            command=self.conn["command"], args=self.conn["args"], env=self.conn["env"]
        )
        read, write = await stack.enter_async_context(stdio_client(params, errlog=self.stderr.writer))
        return await stack.enter_async_context(ClientSession(read, write, **self.conn["session_kwargs"]))

    async def _failed(self, exc: BaseException) -> Exception:
        """The start's error, with what a stdio server last wrote on stderr (its real cause)."""
        said = await self.stderr.last() if self.stderr is not None else ""
        if not said:
            return exc if isinstance(exc, Exception) else RuntimeError(str(exc))
        return RuntimeError(f"{_describe(exc)}; the server said: {said}")

    async def _hold(self) -> None:
        try:
            await _load_mcp_modules()
            from langchain_mcp_adapters.tools import load_mcp_tools

            async with contextlib.AsyncExitStack() as stack:
                session = await self._session(stack)
                await session.initialize()
                self.tools = await load_mcp_tools(session, server_name=self.name)
                self._ready.set_result(None)
                while not self._stop.is_set():  # a ping now and then: a server that died is noticed
                    with contextlib.suppress(TimeoutError):
                        await wait_for(self._stop.wait(), PING_EVERY)
                    if not self._stop.is_set():
                        await wait_for(session.send_ping(), PING_EVERY)
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(await self._failed(exc))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s: the session ended: %s", self.name, _describe(exc))
        finally:
            if self.stderr is not None:
                self.stderr.close()
            self.ended = True
            if self._ready.done() and not self._stop.is_set():
                self._on_end(self.name)  # it went away by itself: report it, start it again

    async def started(self, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            await asyncio.shield(self._ready)

    async def close(self) -> None:
        self._stop.set()
        try:
            await wait_for(self._task, 10)
        except (TimeoutError, Exception):
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


class McpServers:
    """The MCP tools of this process: `current()` before each run."""

    def __init__(
        self, bus: Bus, reserved: set[str] | None = None, process: str = "", role: str = "agent process"
    ) -> None:
        self.bus = bus
        # Which process (and, when a test runs several, which instance in it) reports its status,
        # as people read it in the settings page: "runner on vm (pid 22370)".
        instance = next(_instances)
        self.process = process or (
            f"{role} on {socket.gethostname()} (pid {os.getpid()})"
            + (f" #{instance}" if instance > 1 else "")
        )
        self.reserved = reserved or set()  # the agent's own tool names
        self.version = 0
        self._raw: dict[str, Any] | None = None
        self._loaded: dict[str, Any] | None = None
        self._servers: dict[str, _Server] = {}
        self._tools: list[BaseTool] = []
        self._status: dict[str, ServerStatus] = {}
        self._reloading: asyncio.Task[None] | None = None
        self._ended: dict[str, float] = {}  # servers whose session ended by itself -> when
        self._last_reload = 0.0
        self._retiring: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the published configuration (or this process's file) and follow its changes."""
        settings = await self.bus.kv(self.bus.subjects.settings_bucket)
        try:
            entry = await settings.get(EXTENSIONS_KEY)
            self._raw = json.loads(entry.value or b"{}")
        except Exception:  # nothing published: this process's own file
            self._raw = await asyncio.to_thread(read_raw_extensions, extensions_path())
        self._watch = asyncio.create_task(self._follow(settings), name="mcp-config")

    async def _follow(self, settings: Any) -> None:
        async def changed(value: bytes) -> None:
            self._raw = json.loads(value)
            await self.current()  # now, not at the next run: it need not wait for servers

        await follow_key(settings, EXTENSIONS_KEY, changed, "MCP config")

    async def current(self) -> tuple[int, list[BaseTool]]:
        """(version, tools): the version changes whenever the tools did.

        One reload at a time, in a task of its own: a caller cancelled meanwhile (a cancelled
        run) neither cuts it short nor leaves half-started servers behind.
        """
        while self._stale():
            if self._reloading is None or self._reloading.done():
                self._reloading = asyncio.create_task(self._reload(self._raw or {}), name="mcp-reload")
            await asyncio.shield(self._reloading)
        return self.version, self._tools

    def _stale(self) -> bool:
        restart = bool(self._ended) and time.monotonic() - self._last_reload > RESTART_AFTER
        return self._raw != self._loaded or restart

    def _server_ended(self, name: str) -> None:
        self._ended[name] = time.monotonic()
        self._status[name] = ServerStatus(ok=False, error="its session ended; it is started again")

    def status(self) -> dict[str, ServerStatus]:
        return dict(self._status)

    async def _reload(self, raw: dict[str, Any]) -> None:
        """Start what is new or changed (or ended), keep what is not, then swap in one step."""
        self._last_reload = time.monotonic()
        ended, self._ended = set(self._ended), {}
        try:
            extensions = extensions_from(raw, "the published extensions config")
        except Exception as exc:
            log.warning("MCP config unusable, no MCP tools: %s", exc)
            extensions = extensions_from({}, "defaults")
        status: dict[str, ServerStatus] = {}
        kept: dict[str, _Server] = {}
        starting: dict[str, _Server] = {}
        for name, server in extensions.mcp_servers.items():
            if not server.enabled:
                continue
            spec = json.dumps(server.model_dump(mode="json"), sort_keys=True, default=str)
            old = self._servers.get(name)
            if old is not None and old.spec == spec and not old.ended and name not in ended:
                kept[name] = old
                continue
            try:
                starting[name] = _Server(name, connection(name, server), spec, self._server_ended)
            except Exception as exc:
                status[name] = ServerStatus(ok=False, error=f"{type(exc).__name__}: {exc}")
        try:
            results = await asyncio.gather(
                *(s.started(START_TIMEOUT) for s in starting.values()), return_exceptions=True
            )
        except BaseException:
            await asyncio.gather(*(s.close() for s in starting.values()), return_exceptions=True)
            raise
        for (name, started), outcome in zip(starting.items(), results, strict=True):
            if isinstance(outcome, BaseException):
                error = _describe(outcome)
                log.warning("MCP server %s is left out: %s", name, error)
                status[name] = ServerStatus(ok=False, error=error)
                await started.close()
            else:
                kept[name] = started
        retired = [s for name, s in self._servers.items() if kept.get(name) is not s]
        self._servers = kept
        self._status = status
        self._tools = self._named()
        self.version += 1
        self._loaded = raw
        log.info("MCP tools: %s", ", ".join(t.name for t in self._tools) or "none")
        await self._publish_status()
        if retired:  # runs that started with their tools may still be using them
            closing = asyncio.create_task(self._retire(retired))
            self._retiring.add(closing)
            closing.add_done_callback(self._retiring.discard)

    async def _retire(self, servers: list[_Server]) -> None:
        await asyncio.sleep(RETIRE_AFTER)
        await asyncio.gather(*(s.close() for s in servers), return_exceptions=True)

    def _named(self) -> list[BaseTool]:
        """Every server's tools, a name taken twice (or by the agent's own tools) prefixed by server."""
        counts: dict[str, int] = {}
        for server in self._servers.values():
            for tool in server.tools:
                counts[tool.name] = counts.get(tool.name, 0) + 1
        named = []
        for name, server in self._servers.items():
            mine = []
            for tool in server.tools:
                if counts[tool.name] > 1 or tool.name in self.reserved:
                    tool = tool.model_copy(update={"name": f"{name}_{tool.name}"})
                # Which server a tool is of, for the approval rules (`mcp:<server>`).
                tool = tool.model_copy(update={"metadata": {**(tool.metadata or {}), "mcp_server": name}})
                mine.append(tool)
            self._status[name] = ServerStatus(ok=True, tools=[t.name for t in mine])
            named += mine
        return named

    async def _publish_status(self) -> None:
        report = {
            "process": self.process,
            "updated_at": utcnow().isoformat(),
            "servers": {name: s.__dict__ for name, s in self._status.items()},
        }
        try:
            settings = await self.bus.kv(self.bus.subjects.settings_bucket)
            await settings.put(f"{STATUS_KEY}.{safe_token(self.process)}", json.dumps(report).encode())
        except Exception as exc:  # reporting is best effort
            log.debug("MCP status not published: %s", exc)

    async def _close_servers(self) -> None:
        servers, self._servers = self._servers, {}
        await asyncio.gather(*(s.close() for s in servers.values()), return_exceptions=True)

    async def close(self) -> None:
        for task in [self._watch, self._reloading, *self._retiring]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await self._close_servers()
        with contextlib.suppress(Exception):  # a stopped process reports nothing any more
            settings = await self.bus.kv(self.bus.subjects.settings_bucket)
            await settings.purge(f"{STATUS_KEY}.{safe_token(self.process)}")


def _describe(exc: BaseException) -> str:
    """The innermost cause of a failed start (anyio wraps them in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
