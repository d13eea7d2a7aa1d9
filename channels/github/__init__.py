"""The GitHub adapter (`antler run github`): webhook deliveries of issue and pull-request comments
that mention the bot in (`adapter`, read by `events`), the answer as a comment out (`api`)."""

from channels.github.adapter import GitHubAdapter, run

__all__ = ["GitHubAdapter", "run"]
