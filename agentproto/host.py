"""The agent host: which agents of which owners are on the protocol, their services and heartbeats.

Owners are enabled on the bus (`antler creds --agent-owner <owner>` writes the settings key
`agentproto.owners.<owner>`); each enabled owner gets the lead agent (`agent_protocol.lead_agent`)
and each of their custom agents whose name is a protocol agent token. For every such agent and
owner the host

- registers one NATS micro service named `agents` per session in `agent_protocol.sessions`
  (metadata `agent`, `owner`, `session`, `protocol_version`; endpoints `prompt` and `status` in
  queue group `agents`), which is what `$SRV.INFO.agents` discovery lists, and beats
  `agents.hb.<agent>.<owner>.<session>` for each every `heartbeat_seconds`;
- serves `agents.prompt.<agent>.<owner>.*` and `agents.status.<agent>.<owner>.*` (queue group
  `agents` too, so a registered session's prompt reaches one subscriber, not two): a session not
  registered is served as well when a client addresses it (the SDK's `prompt(subject=...)`).

Several host processes share the work (queue groups); each registers its own instances, as the
protocol expects of a scaled-out agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, Service, ServiceConfig
from synadia_ai.agents import HeartbeatPayload

from agentproto.prompt import Host, PromptStream, Target, create_thread
from bus import Bus, component_ready
from bus.agent_store import AgentStore
from bus.clients import OWNERS_KEY
from bus.records import keys_matching
from bus.runs import SubmissionOrder
from bus.tasks import cancel_and_wait, until_cancelled
from config import AppConfig

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "0.3"
SERVICE_NAME = "agents"
QUEUE = "agents"
AGENT_TOKEN = re.compile(r"^[a-z0-9-]+$")
OWNER_TOKEN = re.compile(r"^[a-z0-9_-]+$")


@dataclass
class Served:
    """One agent of one owner: its wildcard subscriptions and one micro service per registered session."""

    target: Target  # session: the first registered one (the others differ only in it)
    subscriptions: list[Any] = field(default_factory=list)
    services: dict[str, Service] = field(default_factory=dict)


class AgentHost:
    def __init__(self, bus: Bus, config: AppConfig) -> None:
        self.bus = bus
        self.config = config
        self.order = SubmissionOrder()
        self._served: dict[tuple[str, str], Served] = {}
        self._prompts: set[asyncio.Task[None]] = set()
        self._threads: set[str] = set()
        self._reconciling = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._host = Host(bus, config, self.order, self.ensure_thread)

    async def start(self) -> None:
        await self.reconcile()
        self._tasks = [
            asyncio.create_task(self._watch(self.bus.subjects.settings_bucket, f"{OWNERS_KEY}.*")),
            asyncio.create_task(self._watch(self.bus.subjects.agents_bucket, ">")),
            asyncio.create_task(self._beat()),
        ]

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop taking prompts, give those in flight `timeout` seconds, then end them (their runs go on)."""
        for task in self._tasks:
            task.cancel()
        for served in list(self._served.values()):
            await self._withdraw(served)
        self._served.clear()
        if self._prompts:
            _, pending = await asyncio.wait(set(self._prompts), timeout=timeout)
            await cancel_and_wait(*pending)

    async def ensure_thread(self, target: Target) -> None:
        if target.thread_id not in self._threads:
            await create_thread(self.bus, target)
            self._threads.add(target.thread_id)

    # --- what is served -------------------------------------------------------------------------

    async def wanted(self) -> dict[tuple[str, str], Target]:
        """(agent, owner) -> target, for every enabled owner's lead agent and custom agents."""
        keys = await keys_matching(self.bus.js, self.bus.subjects.settings_bucket, f"{OWNERS_KEY}.*")
        owners = [k.rsplit(".", 1)[1] for k in keys if OWNER_TOKEN.match(k.rsplit(".", 1)[1])]
        lead = self.config.agent_protocol.lead_agent
        session = self.config.agent_protocol.sessions[0] if self.config.agent_protocol.sessions else "main"
        store = await AgentStore.open(self.bus)
        wanted: dict[tuple[str, str], Target] = {}
        for owner in owners:
            wanted[(lead, owner)] = Target(lead, owner, session)
            for agent in await store.list(owner):
                if AGENT_TOKEN.match(agent.name) and agent.name != lead:
                    wanted[(agent.name, owner)] = Target(agent.name, owner, session, agent_name=agent.name)
        return wanted

    async def reconcile(self) -> None:
        async with self._reconciling:
            wanted = await self.wanted()
            for key in [k for k in self._served if k not in wanted]:
                await self._withdraw(self._served.pop(key))
            for key, target in wanted.items():
                if key not in self._served:
                    self._served[key] = await self._offer(target)
            await self.bus.nc.flush()  # registered at the server before anyone is told

    async def _offer(self, target: Target) -> Served:
        served = Served(target)
        base = f"{target.agent}.{target.owner}"
        served.subscriptions = [
            await self.bus.nc.subscribe(f"agents.prompt.{base}.*", queue=QUEUE, cb=self._on_prompt),
            await self.bus.nc.subscribe(f"agents.status.{base}.*", queue=QUEUE, cb=self._on_status),
        ]
        about = "Antler's lead agent" if target.agent_name is None else f"Antler agent {target.agent_name}"
        max_payload = f"{self.config.agent_protocol.max_payload_mb}MB"
        for session in self.config.agent_protocol.sessions:
            service = await add_service(
                self.bus.nc,
                ServiceConfig(
                    name=SERVICE_NAME,
                    version="1.0.0",
                    description=f"{about} for {target.owner}, session {session}",
                    metadata={
                        "agent": target.agent,
                        "owner": target.owner,
                        "session": session,
                        "protocol_version": PROTOCOL_VERSION,
                    },
                ),
            )
            endpoints = (
                ("prompt", self._on_prompt_request, {"max_payload": max_payload, "attachments_ok": "true"}),
                ("status", self._on_status_request, None),
            )
            for name, handler, metadata in endpoints:
                subject = f"agents.{name}.{base}.{session}"
                await service.add_endpoint(
                    EndpointConfig(
                        name=name, subject=subject, handler=handler, queue_group=QUEUE, metadata=metadata
                    )
                )
            served.services[session] = service
            await self._heartbeat(target, session, service)  # §8.5: the first one right away
        sessions = list(served.services)
        log.info("serving agent %s of owner %s (sessions %s)", target.agent, target.owner, sessions)
        return served

    async def _withdraw(self, served: Served) -> None:
        for sub in served.subscriptions:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        for service in served.services.values():
            with contextlib.suppress(Exception):
                await service.stop()
        log.info("no longer serving agent %s of owner %s", served.target.agent, served.target.owner)

    # --- requests -------------------------------------------------------------------------------

    def _target(self, subject: str) -> Target | None:
        parts = subject.split(".")
        if len(parts) != 5:
            return None
        served = self._served.get((parts[2], parts[3]))
        if served is None:
            return None
        t = served.target
        return Target(t.agent, t.owner, parts[4], t.agent_name)

    async def _on_prompt_request(self, request: Request) -> None:
        await self._on_prompt(request._msg)

    async def _on_prompt(self, msg: Any) -> None:
        target = self._target(msg.subject)
        if target is None:  # withdrawn since the message was sent
            if msg.reply:
                headers = {"Nats-Service-Error-Code": "404", "Nats-Service-Error": "no such agent"}
                await self.bus.nc.publish(msg.reply, b"", headers=headers)
                await self.bus.nc.publish(msg.reply, b"")
            return
        # Each prompt in a task of its own: a long run never holds up the next prompt.
        task = asyncio.create_task(PromptStream(self._host, target, msg).serve())
        self._prompts.add(task)
        task.add_done_callback(self._prompts.discard)

    async def _on_status_request(self, request: Request) -> None:
        await self._on_status(request._msg)

    async def _on_status(self, msg: Any) -> None:
        target = self._target(msg.subject)
        if target is None or not msg.reply:
            return
        served = self._served[(target.agent, target.owner)]
        service = served.services.get(target.session) or next(iter(served.services.values()), None)
        payload = self._payload(target, target.session, service.id if service else "")
        await self.bus.nc.publish(msg.reply, payload)

    # --- liveness -------------------------------------------------------------------------------

    def _payload(self, target: Target, session: str, instance_id: str) -> bytes:
        from synadia_ai.agents.heartbeat import now_iso

        beat = HeartbeatPayload(
            agent=target.agent,
            owner=target.owner,
            session=session,
            instance_id=instance_id,
            ts=now_iso(),
            interval_s=self.config.agent_protocol.heartbeat_seconds,
            protocol_version=PROTOCOL_VERSION,
        )
        return beat.model_dump_json().encode()

    async def _heartbeat(self, target: Target, session: str, service: Service) -> None:
        subject = f"agents.hb.{target.agent}.{target.owner}.{session}"
        await self.bus.nc.publish(subject, self._payload(target, session, service.id))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.agent_protocol.heartbeat_seconds)
            for served in list(self._served.values()):
                for session, service in list(served.services.items()):
                    try:
                        await self._heartbeat(served.target, session, service)
                    except Exception as exc:
                        log.warning("heartbeat of %s/%s not sent: %s", served.target.agent, session, exc)

    async def _watch(self, bucket: str, keys: str) -> None:
        """Reconcile whenever an owner is enabled or an agent is made, changed or deleted."""
        while True:
            try:
                kv = await self.bus.kv(bucket)
                watcher = await kv.watch(keys, include_history=False, ignore_deletes=False)
                caught_up = False
                async for entry in watcher:
                    if entry is None:
                        caught_up = True  # the values at start were reconciled by start()
                    elif caught_up:
                        await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("watching %s stopped (%s); starting it again", bucket, exc)
                await asyncio.sleep(1.0)


async def run(bus: Bus, config: AppConfig) -> None:
    """The agent-protocol host component: serve until cancelled, then stop taking prompts."""
    host = AgentHost(bus, config)
    await host.start()
    component_ready()
    try:
        await until_cancelled()
    finally:
        await host.stop()
