"""The Slack adapter (`antler run slack`): slack-bolt in Socket Mode in, the router's replies out."""

from channels.slack.adapter import SlackAdapter, mrkdwn, run

__all__ = ["SlackAdapter", "mrkdwn", "run"]
