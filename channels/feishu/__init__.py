"""The Feishu/Lark adapter (`antler run feishu`): lark-oapi's long connection in (`ws`), one card per
answer out (`adapter`), lark-oapi's HTTP calls on one kept client (`lark_http`).
"""

from channels.feishu.adapter import FeishuAdapter, FeishuError, message_text, run

__all__ = ["FeishuAdapter", "FeishuError", "message_text", "run"]
