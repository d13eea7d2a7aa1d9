"""The WeChat Official Account adapter (`antler run wechat`): the callback URL in; passive replies and
the customer-service message API out (`adapter`).

Shared with the WeCom adapter (`channels.wecom`): the callback server (`callback`), the XML messages
(`messages`), the JSON APIs with their access token (`api`) and the adapter's common part (`base`).
"""

from channels.wechat.adapter import WeChatAdapter, run

__all__ = ["WeChatAdapter", "run"]
