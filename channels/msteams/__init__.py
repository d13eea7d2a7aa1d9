"""The Microsoft Teams adapter (`antler run msteams`): the bot's messaging endpoint in, the Bot
Connector out (`adapter`); the Bot Framework's authentication both ways (`auth`), the connector
calls within Teams' rate limits (`connector`) and files offered with Teams' consent card (`files`),
through the Microsoft 365 Agents SDK.
"""

from channels.msteams.adapter import TeamsAdapter, run
from channels.msteams.connector import TeamsError, TeamsUnavailable

__all__ = ["TeamsAdapter", "TeamsError", "TeamsUnavailable", "run"]
