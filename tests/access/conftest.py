"""The gateway tests' stack config (tokens tok-ana, an admin, and tok-bob) for the access tests."""

from tests.gateway.conftest import stack_config

__all__ = ["stack_config"]
