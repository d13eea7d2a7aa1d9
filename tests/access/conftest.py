"""The gateway tests' stack config (tokens tok-ana, an admin, and tok-bob) for the access tests."""

from tests.support.gateway import stack_config  # noqa: F401  (the fixture)
