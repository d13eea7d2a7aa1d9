"""`python -m <component>`: run one component until SIGTERM/SIGINT, then drain it.

`antler run <name>` and each component package's `__main__` both come here, so
every component starts, logs and stops the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bus.connection import Bus
from bus.errors import BusConnectError, BusError
from bus.log_context import LogIds
from bus.messages import ComponentHealth, ComponentReady
from bus.permissions import ADMIN, RIGHTS, USERS_FILE, inbox_prefix, load_credentials, user_name
from bus.runtime import ComponentEntry, ComponentFailed, run_main, serve, stop_on_signals
from bus.subjects import Subjects
from config import AppConfig, BusConfig, ConfigError, load_config

NATS_URL_ENV = "ANTLER_NATS_URL"
NATS_USER_ENV = "ANTLER_NATS_USER"
NATS_PASSWORD_ENV = "ANTLER_NATS_PASSWORD"


class LaunchError(Exception):
    """A problem to print as one line (no traceback) with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        self.code = code
        super().__init__(message)


def add_arguments(parser: argparse.ArgumentParser, *, nats: bool = True) -> None:
    parser.add_argument(
        "-c", "--config", help="config.yaml to use (default: $ANTLER_CONFIG_PATH, ./config.yaml)"
    )
    parser.add_argument("--data-dir", help="override bus.data_dir")
    parser.add_argument("--prefix", help="override bus.prefix")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    if nats:
        parser.add_argument(
            "--nats-url",
            help=f"NATS to talk to (default: ${NATS_URL_ENV}, bus.url, or the running `antler up`)",
        )


def load(args: argparse.Namespace) -> AppConfig:
    config = load_config(args.config)
    if getattr(args, "data_dir", None):
        config.bus.data_dir = args.data_dir
    if getattr(args, "prefix", None):
        config.bus.prefix = args.prefix
    return config


def setup_logging(config: AppConfig, verbose: bool) -> None:
    level = logging.DEBUG if verbose else getattr(logging, config.log_level)
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s%(antler_ids)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for handler in logging.getLogger().handlers:  # the run and trace of the line, when it has them
        if not any(isinstance(f, LogIds) for f in handler.filters):
            handler.addFilter(LogIds())
    if not verbose:
        # nats-py logs every reconnect attempt at ERROR; ours say it once, readably.
        logging.getLogger("nats.aio.client").setLevel(logging.CRITICAL)
        logging.getLogger("httpx").setLevel(logging.WARNING)


def nats_url(args: argparse.Namespace, config: AppConfig) -> str:
    """The NATS URL by precedence: --nats-url, $ANTLER_NATS_URL, bus.url, the running `antler up`."""
    if getattr(args, "nats_url", None):
        return str(args.nats_url)
    if os.environ.get(NATS_URL_ENV):
        return os.environ[NATS_URL_ENV]
    if config.bus.url:
        return config.bus.url
    url_file = Path(config.bus.data_dir) / "nats.url"
    if url_file.is_file():
        return url_file.read_text(encoding="utf-8").strip()
    raise LaunchError(
        "no NATS to talk to: start `antler up` in this directory, "
        f"or pass --nats-url / set ${NATS_URL_ENV} / set bus.url in config.yaml",
        code=2,
    )


@dataclass(frozen=True)
class Login:
    """How one process connects: the bus settings with its credentials, its inbox, whether it provisions."""

    bus: BusConfig
    inbox_prefix: str | None = None
    provision: bool = True
    source: str = "no credentials"  # where the credentials came from, for a refusal's message

    async def connect(self, url: str, name: str, *, provision: bool = True) -> Bus:
        """Connect; with `provision`, also create the streams and buckets if this user may.

        Raises:
            LaunchError: the server refused these credentials (says which were used and what to do).
            BusConnectError: the server could not be reached.
        """
        try:
            return await Bus.connect(
                url,
                self.bus,
                name=name,
                provision=provision and self.provision,
                inbox_prefix=self.inbox_prefix,
            )
        except BusConnectError as exc:
            if "authorization" not in str(exc).lower():
                raise
            who = f"user {self.bus.user!r}" if self.bus.user else "no user"
            raise LaunchError(
                f"NATS at {url} refused the login ({who}, {self.source}). "
                "`antler up`'s embedded server accepts only the users it generated: run this next to that "
                "`antler up`, or give its config.yaml with -c / $ANTLER_CONFIG_PATH (the data dir beside it "
                f"holds {USERS_FILE}), or set ${NATS_USER_ENV} and ${NATS_PASSWORD_ENV} "
                "(`antler creds` prints every user)",
                code=2,
            ) from None


def login(config: AppConfig, component: str | None = None) -> Login:
    """The NATS user `component` (None: a command line tool) connects as.

    By precedence: $ANTLER_NATS_USER and $ANTLER_NATS_PASSWORD; the user in config.yaml
    (bus.user, token or credentials); the users saved in `<data_dir>/nats-users.json` (by `antler
    up` for its embedded server, or by `antler creds --out <data_dir>` for servers of one's own);
    else none. A component's own user
    (`antler creds`) gets its own inbox and leaves provisioning to the admin.
    """
    subjects = Subjects(config.bus.prefix)
    bus = config.bus
    source = f"none found: no ${NATS_USER_ENV}, no bus.user in config, no {USERS_FILE} in {bus.data_dir}"
    if os.environ.get(NATS_USER_ENV):
        bus = bus.model_copy(
            update={"user": os.environ[NATS_USER_ENV], "password": os.environ.get(NATS_PASSWORD_ENV)}
        )
        source = f"from ${NATS_USER_ENV}"
    elif bus.user or bus.token or bus.credentials:
        source = "from bus.user / bus.token / bus.credentials in the config"
    else:
        data_dir = Path(bus.data_dir)
        saved = load_credentials(data_dir / USERS_FILE)
        found = saved.get(component or ADMIN) or saved.get(ADMIN)
        if found is not None:
            bus = bus.model_copy(update={"user": found[0], "password": found[1]})
            source = f"saved by `antler up` in {data_dir / USERS_FILE}"
    if component in RIGHTS and bus.user == user_name(subjects, component):
        return Login(bus, inbox_prefix(subjects, component), provision=False, source=source)
    return Login(bus, source=source)


def status(message: str) -> None:
    """A progress line for humans (stderr, so stdout stays parseable)."""
    print(message, file=sys.stderr, flush=True)


async def run_component(name: str, entry: ComponentEntry, args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    url = nats_url(args, config)
    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        bus = await login(config, name).connect(url, f"antler-{name}")
        status(f"{name}: running against {url} (prefix '{config.bus.prefix}')")
        announcements: set[asyncio.Task[None]] = set()
        said_ready = False

        def announce(component: str, problem: str | None = None) -> None:
            # Whoever started this process (`antler up`'s pools) learns it over the bus.
            message = ComponentReady(component=component, pid=os.getpid(), problem=problem)
            task = asyncio.create_task(bus.publish_core(bus.subjects.component_ready(component), message))
            announcements.add(task)
            task.add_done_callback(announcements.discard)

        def on_health(component: str, health: ComponentHealth) -> None:
            nonlocal said_ready
            if health.status in ("healthy", "degraded") and not said_ready:
                said_ready = True
                status(f"{component}: ready")
                announce(component)
            elif health.status == "unhealthy" and not said_ready:
                # So that `antler up` is not left waiting for it (its countdown would go stale there).
                announce(component, health.reason or "unhealthy")

        try:
            await serve(bus, config, {name: entry}, stop, on_health=on_health)
        except ComponentFailed as exc:
            raise LaunchError(str(exc)) from None
        finally:
            await bus.close()
    finally:
        undo()
    status(f"{name}: stopped")
    return 0


def launch(name: str, entry: ComponentEntry, argv: Sequence[str] | None = None) -> int:
    """Entry of `python -m <component>`."""
    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run the {name} component.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_main(run_component(name, entry, args))
    except LaunchError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return exc.code
    except (ConfigError, BusError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
