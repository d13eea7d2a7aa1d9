"""Components started on the test's config as it has set it (`start_stack`, tests/support/runner.py)."""

from tests.support.runner import start_stack  # noqa: F401  (a fixture)
