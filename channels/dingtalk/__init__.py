"""The DingTalk adapter (`antler run dingtalk`): the Stream protocol in (`stream`); Markdown, AI
cards and files out (`adapter`), through DingTalk's HTTP APIs (`api`).
"""

from channels.dingtalk.adapter import MAX_PARAM_BYTES, DingTalkAdapter, run

__all__ = ["MAX_PARAM_BYTES", "DingTalkAdapter", "run"]
