"""What every subcommand shares: config, logging, finding the NATS to talk to."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from config import AppConfig, load_config

NATS_URL_ENV = "ANTLER_NATS_URL"


class CliError(Exception):
    """A problem to print as one line (no traceback) with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        self.code = code
        super().__init__(message)


def add_common(parser: argparse.ArgumentParser, *, nats: bool = True) -> None:
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
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not verbose:
        # nats-py logs every reconnect attempt at ERROR; ours say it once, readably.
        logging.getLogger("nats.aio.client").setLevel(logging.CRITICAL)


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
    raise CliError(
        "no NATS to talk to: start `antler up` in this directory, "
        f"or pass --nats-url / set ${NATS_URL_ENV} / set bus.url in config.yaml",
        code=2,
    )


def status(message: str) -> None:
    """A progress line for humans (stderr, so stdout stays parseable)."""
    print(message, file=sys.stderr, flush=True)
