"""The Matrix adapter (`antler run matrix`): matrix-nio's sync in, messages edited as they stream
out (`adapter`; the calls that show a reply: `client`)."""

from channels.matrix.adapter import MatrixAdapter, run

__all__ = ["MatrixAdapter", "run"]
