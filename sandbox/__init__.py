"""The sandbox broker service, its providers (bwrap, local), virtual paths and limits.

Lands with the sandbox broker issue; nothing here yet.
"""
