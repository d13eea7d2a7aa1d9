"""What every subcommand shares: config, logging, finding the NATS to talk to (see bus.launcher)."""

from bus.launcher import LaunchError as CliError
from bus.launcher import add_arguments as add_common
from bus.launcher import load, login, nats_url, setup_logging, status

__all__ = ["CliError", "add_common", "load", "login", "nats_url", "setup_logging", "status"]
