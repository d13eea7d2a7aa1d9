"""What every chat adapter shares to deliver replies, whatever its platform.

- `reply_stream`: `ReplyStream`, the delivery policy (each chat's replies in order, chats side by
  side, newest partial only, rate limits obeyed, never a shorter text, a final's steps once);
- `surface`: `Surface`, all it asks of a platform (post, edit, finish, files);
- `bookkeeping`: what an adapter keeps of each reply and each rate limit, in KV `<prefix>_replies`;
- `consumer`: the durable consumer of `<prefix>.chat.out.<channel>`;
- `splitting`: long answers in pieces that each fit one message;
- `standby`: one active copy of an adapter (or of its replies), the others standing by;
- `connection_health`: unhealthy while a platform SDK's own connection is down;
- `unreadable`: platform messages an adapter cannot read, acknowledged and dead-lettered.
"""

from channels.delivery.reply_stream import ReplyStream
from channels.delivery.surface import Surface

__all__ = ["ReplyStream", "Surface"]
