"""The chat router and one adapter per platform (Slack, Telegram, Feishu, DingTalk).

Lands with the channels issue; nothing here yet.
"""
