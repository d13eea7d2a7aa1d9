"""The Discord adapter (`antler run discord`): discord.py's gateway connection in, the router's
replies out (`adapter`); the client and its screened gateway events (`gateway`), the REST calls
that show replies within Discord's rate limits (`rest`), our chat commands as slash commands
(`commands`), and the gateway session kept on the bus for the copy that takes over (`session`).
"""

from channels.discord.adapter import DiscordAdapter, run
from channels.discord.commands import discord_commands
from channels.discord.rest import DiscordError, DiscordRest, DiscordUnavailable

__all__ = ["DiscordAdapter", "DiscordError", "DiscordRest", "DiscordUnavailable", "discord_commands", "run"]
