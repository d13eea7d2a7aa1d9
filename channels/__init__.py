"""Chat: the router (chat -> thread, commands, run events -> replies) and the platform adapters.

    antler run router         # or: python -m channels
    antler run telegram       # slack, feishu, dingtalk

- `router/`: the chat router component (inbound, commands, the reply projection, partitions);
- `delivery/`: what every adapter shares to deliver replies (`ReplyStream`, `Surface`, standby);
- `telegram/`, `slack/`, `feishu/`, `dingtalk/`: one folder per platform, its adapter and helpers;
- `command_names`: the chat commands as each platform spells them;
- `errors`: the package's exception tree.
"""

from channels.router import Router, chat_key, run

__all__ = ["Router", "chat_key", "run"]
