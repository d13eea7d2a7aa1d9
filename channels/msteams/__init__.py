"""The Microsoft Teams adapter (`antler run msteams`): the bot's messaging endpoint in, the Bot
Connector out (`adapter`); the Bot Framework's authentication both ways (`auth`) and the connector
calls within Teams' rate limits (`connector`), through the Microsoft 365 Agents SDK.
"""

from channels.msteams.adapter import TeamsAdapter, run
from channels.msteams.connector import TeamsError, TeamsUnavailable

__all__ = ["TeamsAdapter", "TeamsError", "TeamsUnavailable", "run"]
