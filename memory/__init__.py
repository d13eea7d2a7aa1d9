"""Long-term memory: the memory updater component and the `memory` service.

antler run memory        # or: python -m memory

The updater revises each user's memory document (KV `<prefix>_memory`,
DeerFlow's memory.json shape) from their conversations; the agent runner puts
it into the system prompt; the gateway's memory API reads and edits it
through the `memory` service.
"""
