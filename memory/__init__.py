"""The memory document, the updater consumer, its prompts and prompt injection.

Lands with the memory issue; nothing here yet.
"""
