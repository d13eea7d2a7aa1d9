"""Chat: the router (chat -> thread, commands, run events -> replies) and, as they land, platform adapters.

antler run router         # or: python -m channels
"""

from channels.router import Router, chat_key, run

__all__ = ["Router", "chat_key", "run"]
