"""The dead-letter stream: poison messages kept with the reason they failed.

A dead letter is the original payload and headers, plus `Antler-Dlq-*`
headers saying which consumer gave up, why, after how many deliveries, and
where the message came from, so `antler dlq replay` can put it back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js.errors import NotFoundError

from bus.connection import MSG_ID, Bus

log = logging.getLogger(__name__)

H_CONSUMER = "Antler-Dlq-Consumer"
H_REASON = "Antler-Dlq-Reason"
H_DELIVERIES = "Antler-Dlq-Deliveries"
H_STREAM = "Antler-Dlq-Stream"
H_STREAM_SEQ = "Antler-Dlq-Stream-Seq"
H_SUBJECT = "Antler-Dlq-Subject"
H_MSG_ID = "Antler-Dlq-Msg-Id"
H_TIME = "Antler-Dlq-Time"

# JetStream headers that must not be replayed: they would make the store refuse or misroute it.
_DROP_ON_COPY = ("Nats-Expected-", "Nats-Rollup", "Nats-TTL")


@dataclass(frozen=True)
class DeadLetter:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]

    @property
    def reason(self) -> str:
        return self.headers.get(H_REASON, "")

    @property
    def consumer(self) -> str:
        return self.headers.get(H_CONSUMER, "")

    @property
    def deliveries(self) -> int:
        return int(self.headers.get(H_DELIVERIES, "0") or 0)

    @property
    def original_subject(self) -> str:
        return self.headers.get(H_SUBJECT, "")

    @property
    def original_msg_id(self) -> str | None:
        return self.headers.get(H_MSG_ID)

    @property
    def time(self) -> str:
        return self.headers.get(H_TIME, "")


def _copyable(headers: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (headers or {}).items() if not k.startswith(_DROP_ON_COPY) and k != MSG_ID}


async def dead_letter(
    bus: Bus,
    *,
    stream: str,
    stream_seq: int,
    subject: str,
    data: bytes,
    headers: dict[str, str] | None,
    consumer: str,
    reason: str,
    deliveries: int,
) -> None:
    """Store one failed message in the DLQ (deduplicated per stream and sequence)."""
    hdrs = _copyable(headers)
    original_id = (headers or {}).get(MSG_ID)
    if original_id:
        hdrs[H_MSG_ID] = original_id
    hdrs.update(
        {
            H_CONSUMER: consumer,
            H_REASON: reason[:2000].replace("\r", " ").replace("\n", " "),
            H_DELIVERIES: str(deliveries),
            H_STREAM: stream,
            H_STREAM_SEQ: str(stream_seq),
            H_SUBJECT: subject,
            H_TIME: datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )
    await bus.publish(bus.subjects.dlq(stream), data, msg_id=f"dlq:{stream}:{stream_seq}", headers=hdrs)
    log.warning(
        "dead-lettered %s seq %d from consumer %s after %d deliveries: %s",
        subject,
        stream_seq,
        consumer,
        deliveries,
        reason,
    )


async def list_dead_letters(bus: Bus, limit: int = 50) -> list[DeadLetter]:
    """The oldest `limit` dead letters still in the DLQ."""
    info = await bus.js.stream_info(bus.subjects.dlq_stream)
    out: list[DeadLetter] = []
    seq = info.state.first_seq
    while seq and seq <= info.state.last_seq and len(out) < limit:
        letter = await get_dead_letter(bus, seq)
        if letter is not None:
            out.append(letter)
        seq += 1
    return out


async def get_dead_letter(bus: Bus, seq: int) -> DeadLetter | None:
    try:
        raw = await bus.js.get_msg(bus.subjects.dlq_stream, seq)
    except NotFoundError:
        return None
    return DeadLetter(
        seq=seq, subject=raw.subject or "", data=raw.data or b"", headers=dict(raw.headers or {})
    )


async def replay(bus: Bus, letter: DeadLetter, *, keep: bool = False) -> None:
    """Publish a dead letter again on its original subject, then (unless `keep`) remove it.

    The replay gets a fresh `Nats-Msg-Id` (the original one may still be inside
    the dedupe window and would be dropped as a duplicate).
    """
    if not letter.original_subject:
        raise ValueError(f"dead letter {letter.seq} does not say where it came from")
    headers = {k: v for k, v in letter.headers.items() if not k.startswith("Antler-Dlq-")}
    base = (
        letter.original_msg_id or f"{letter.headers.get(H_STREAM, '')}:{letter.headers.get(H_STREAM_SEQ, '')}"
    )
    await bus.publish(
        letter.original_subject, letter.data, msg_id=f"{base}:replay:{letter.seq}", headers=headers
    )
    if not keep:
        await bus.js.delete_msg(bus.subjects.dlq_stream, letter.seq)
