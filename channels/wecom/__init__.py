"""The WeCom adapter (`antler run wecom`): a self-built app's encrypted callback URL in, the app
message API out (`adapter`), on the parts it shares with the WeChat adapter (`channels.wechat`).
"""

from channels.wecom.adapter import WeComAdapter, run

__all__ = ["WeComAdapter", "run"]
