"""The chat router (`antler run router`, `python -m channels`): chats to threads, commands, run
events back as replies. Read it top-down:

- `component`: `run(bus, config)`, the consumers of each chat partition this router holds;
- `inbound`: `Router`, a chat message becoming a run (policy, files, the run request);
- `commands/`: the chat commands answered here, one module each behind one dispatch table;
- `bindings`: which thread each chat talks to (KV `<prefix>_chats`);
- `projection`, `run_reply`, `ordering`: run events back as chat replies, in order;
- `partitions`: the share of the chat partitions this router holds, by leases in the bus.
"""

from channels.router.bindings import chat_key
from channels.router.component import run
from channels.router.inbound import RUN_NAMESPACE, Router

__all__ = ["RUN_NAMESPACE", "Router", "chat_key", "run"]
