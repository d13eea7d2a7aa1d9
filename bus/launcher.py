"""`python -m <component>`: run one component until SIGTERM/SIGINT, then drain it.

`antler run <name>` and each component package's `__main__` both come here, so
every component starts, logs and stops the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import logging.handlers
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bus.connection import Bus
from bus.errors import BusConnectError, BusError
from bus.log_context import LogIds
from bus.messages import ComponentHealth, ComponentReady
from bus.permissions import ADMIN, RIGHTS, USERS_FILE, inbox_prefix, load_credentials, user_name
from bus.provision import connect_and_provision
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


CONSOLE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s%(antler_ids)s"
# Several processes append to one file (`antler up` and its children): each line says which.
FILE_FORMAT = "%(asctime)s %(process)d %(levelname)-7s %(name)s: %(message)s%(antler_ids)s"


def setup_logging(config: AppConfig, verbose: bool, log_file: str | os.PathLike[str] | None = None) -> None:
    """The process's log: on stderr at `log_level` (`verbose`: DEBUG); with `log_file`, the log goes
    there at `log_level` and stderr shows only what needs someone's attention (warnings and errors;
    `verbose`: everything), so a console is not buried under routine lines."""
    level = getattr(logging, config.log_level)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter(CONSOLE_FORMAT, datefmt="%H:%M:%S"))
    console.addFilter(_NotStatus())  # printed already
    handlers: list[logging.Handler] = [console]
    if verbose:
        console.setLevel(logging.DEBUG)
    elif log_file is not None:
        console.setLevel(max(level, logging.WARNING))
    else:
        console.setLevel(level)
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        # Watched: a log rotated away (logrotate) is reopened, not written on in its old place.
        to_file = logging.handlers.WatchedFileHandler(log_file, encoding="utf-8")
        to_file.setFormatter(logging.Formatter(FILE_FORMAT))
        to_file.setLevel(level)
        handlers.append(to_file)
    root = logging.getLogger()
    if not root.handlers:  # only entry points configure logging, once (a test may call this again)
        root.setLevel(min(h.level for h in handlers))
        for handler in handlers:
            handler.addFilter(LogIds())  # the run and trace of the line, when it has them
            root.addHandler(handler)
    else:
        for handler in root.handlers:
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
            if provision and self.provision:
                return await connect_and_provision(url, self.bus, name=name, inbox_prefix=self.inbox_prefix)
            return await Bus.connect(url, self.bus, name=name, inbox_prefix=self.inbox_prefix)
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


STATUS_LOGGER = "antler.status"  # status lines, logged for the log file (the console has them printed)


def status(message: str) -> None:
    """A progress line for humans (stderr, so stdout stays parseable); the log file gets it too, so
    that it tells the whole story in order."""
    print(message, file=sys.stderr, flush=True)
    logging.getLogger(STATUS_LOGGER).info("%s", message.strip())


class _NotStatus(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != STATUS_LOGGER


async def run_component(name: str, entry: ComponentEntry, args: argparse.Namespace) -> int:
    config = load(args)
    log_file = getattr(args, "log_file", None)
    setup_logging(config, args.verbose, log_file)
    # A child of `antler up` (which names its log file) keeps its progress lines to that file: the
    # console is `antler up`'s.
    say = status if log_file is None else logging.getLogger(f"antler.{name}").info
    url = nats_url(args, config)
    stop = asyncio.Event()
    undo = stop_on_signals(stop)
    try:
        bus = await login(config, name).connect(url, f"antler-{name}")
        say(f"{name}: running against {url} (prefix '{config.bus.prefix}')")
        announcements: set[asyncio.Task[None]] = set()
        said_ready = False

        def announce(component: str, problem: str | None = None, degraded: str | None = None) -> None:
            # Whoever started this process (`antler up`'s pools) learns it over the bus.
            message = ComponentReady(component=component, pid=os.getpid(), problem=problem, degraded=degraded)
            task = asyncio.create_task(bus.publish_core(bus.subjects.component_ready(component), message))
            announcements.add(task)
            task.add_done_callback(announcements.discard)

        def on_health(component: str, health: ComponentHealth) -> None:
            nonlocal said_ready
            if health.status in ("healthy", "degraded") and not said_ready:
                said_ready = True
                say(f"{component}: ready")
                announce(component, degraded=health.reason if health.status == "degraded" else None)
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
    say(f"{name}: stopped")
    return 0


def exit_code(who: str, call: Callable[[], int]) -> int:
    """`call()`'s exit code, or the one for what it raised: the rule of every Antler command line.

    A `LaunchError` is its message on one line (`<who>: ...`) and its code; a config or bus error
    its message and 1; Ctrl-C 130; output piped into `head` and friends that stopped reading, a
    quiet 0, as other Unix tools do. Anything else is a bug, and its traceback is shown.
    """
    try:
        return call()
    except LaunchError as exc:
        print(f"{who}: {exc}", file=sys.stderr)
        return exc.code
    except (ConfigError, BusError) as exc:
        print(f"{who}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def launch(name: str, entry: ComponentEntry, argv: Sequence[str] | None = None) -> int:
    """Entry of `python -m <component>`."""
    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run the {name} component.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return exit_code(name, lambda: run_main(run_component(name, entry, args)))
