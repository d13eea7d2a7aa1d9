"""The scheduler's chat tests run on the Telegram stack of `tests.support.adapters`."""

from tests.support.adapters import start_adapter, telegram, telegram_stack  # noqa: F401  (fixtures)
