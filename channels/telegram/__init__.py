"""The Telegram adapter (`antler run telegram`): python-telegram-bot long polling (or a webhook) in,
the router's replies out (`adapter`); updates screened before the library parses them (`updates`).
"""

from channels.telegram.adapter import TelegramAdapter, run
from channels.telegram.formatting import render_html, split_message

__all__ = ["TelegramAdapter", "render_html", "run", "split_message"]
