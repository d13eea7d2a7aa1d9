"""`AsyncClient`: every method of the client, on the caller's event loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from antler.client._conversation import Conversation
from antler.client._files import Files
from antler.client._goals import Goals
from antler.client._memory import Memory
from antler.client._schedules import Schedules
from antler.client._settings import Settings
from antler.client._threads import Threads


class AsyncClient(Conversation, Files, Goals, Memory, Schedules, Settings, Threads):
    """Antler from async Python code, over the bus, with the gateway's rights.

    `AsyncClient()` talks to the `antler up` running here (its config.yaml found as `antler send`
    finds it); `AsyncClient.embedded(config=...)` starts an Antler of its own for as long as the
    client is open. Use it as `async with`, or call `close()`.

    Args:
        config: config.yaml's path (or an `AppConfig`); default `$ANTLER_CONFIG_PATH`, ./config.yaml.
        nats_url: the NATS to talk to; default as `antler send` finds it.
        user, password: a NATS login; creds: a `nats` context file `antler creds` wrote.
            Default: the gateway's user `antler up` saved in its data dir.
        user_id: whose threads, memory and files (default `default`, the web UI's in single-user mode).
        model_name, thinking_enabled, subagent_enabled, plan_mode, agent_name: run options for
            every turn (a turn's own keyword arguments override them).
        run_timeout: seconds a turn may go without an event before `Unavailable` (default: no limit).
    """

    @classmethod
    def embedded(cls, config: Any = None, **kwargs: Any) -> AsyncClient:
        """A client that starts its own Antler (nats-server and every component, as `antler up`
        does) on first use and stops it on `close()`.

        Args:
            config: config.yaml's path (its directory is Antler's: data dir, extensions), or a dict
                of config.yaml's settings (written to a temporary directory, removed on close).
        """
        from antler.client._embedded import EmbeddedAntler

        antler = EmbeddedAntler(config)
        try:
            client = cls(antler.config_path, **kwargs)
        except BaseException:
            antler.discard()
            raise
        client._embedded = antler
        return client

    _embedded: Any = None

    @property
    def embedded_dir(self) -> Path | None:
        """The embedded Antler's directory (config.yaml, its `.antler` data dir), or None."""
        return self._embedded.workdir if self._embedded is not None else None

    async def _started(self) -> None:
        if self._embedded is not None:
            url = await self._embedded.start()
            self._where["url"] = url

    async def _stopped(self) -> None:
        if self._embedded is not None:
            await self._embedded.stop()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
