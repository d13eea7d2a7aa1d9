"""Moving the records of the single `threads`, `runs` and `thread_runs` buckets of an installation
made before the split by partition into the buckets per partition, and removing them
(`bus.split_kv` says how the move keeps every write; docs/operating.md, "Moving to streams per
partition"). `antler provision` does it (`retire_all`), once no process of an earlier version is
heard on the metrics feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from nats.js.errors import NotFoundError

from bus import split_kv
from bus.connection import Bus
from bus.split_kv import MOVING_KEY, SplitKV

log = logging.getLogger(__name__)


async def _split(bus: Bus, bucket: str) -> SplitKV:
    kv = await bus.kv(bucket)
    if not isinstance(kv, SplitKV):
        raise TypeError(f"{bucket} is not split by partition")
    return kv


async def mark_moving(bus: Bus, bucket: str) -> float:
    """Mark the legacy bucket's records as moving (once); returns the wall-clock time it was marked."""
    info = await bus.js.stream_info(f"KV_{bucket}")
    metadata = dict(info.config.metadata or {})
    if MOVING_KEY in metadata:
        try:
            return float(metadata[MOVING_KEY])
        except ValueError:
            pass
    metadata[MOVING_KEY] = f"{time.time():.3f}"
    info.config.metadata = metadata
    await bus.js.update_stream(info.config)
    log.info("KV bucket %s: its records move to the buckets per partition", bucket)
    return float(metadata[MOVING_KEY])


async def retire_all(bus: Bus) -> bool:
    """`retire_legacy` for each split bucket whose single bucket of before is still there, once no
    process of an earlier version runs (`earlier_versions`); returns whether none is left."""
    left = []
    for bucket in bus.subjects.split_buckets:
        try:
            await bus.js.stream_info(f"KV_{bucket}")
            left.append(bucket)
        except NotFoundError:
            continue
    if not left:
        return True
    earlier = await earlier_versions(bus)
    if earlier:
        log.warning(
            "KV buckets %s are kept as they are: %d process(es) of an earlier version still use them (%s); "
            "run antler provision again once they are upgraded (docs/operating.md, 'Moving to streams "
            "per partition')",
            ", ".join(left),
            len(earlier),
            ", ".join(sorted(earlier)),
        )
        return False
    done = await asyncio.gather(*(retire_legacy(bus, bucket) for bucket in left))
    return all(done)


async def earlier_versions(bus: Bus, listen: float | None = None) -> list[str]:
    """The processes heard on the metrics feed within `listen` seconds (`bus.split_kv.LISTEN`) that
    do not say they use the buckets per partition: components of a version from before the split.
    (Processes publish every `observability.metrics_interval_seconds`, 5 by default; with 0 they are
    not heard.)"""
    from bus.messages import MetricsSnapshot, decode

    heard: dict[str, bool] = {}

    async def on_snapshot(msg: Any) -> None:
        with contextlib.suppress(Exception):  # not a snapshot this version can read: not counted
            snapshot = decode(MetricsSnapshot, msg.data)
            label = f"{'+'.join(snapshot.components) or '?'}@{snapshot.process}"
            heard[label] = snapshot.split_buckets
        return None

    subscription = await bus.nc.subscribe(bus.subjects.metrics_all, cb=on_snapshot)
    try:
        # A whole interval of every process.
        await asyncio.sleep(split_kv.LISTEN if listen is None else listen)
    finally:
        await subscription.unsubscribe()
    return [label for label, split in heard.items() if not split]


async def retire_legacy(bus: Bus, bucket: str) -> bool:
    """Move the legacy bucket's records to the partition buckets and remove it (see the module):
    marks it, waits until every process has seen the mark, moves, and removes it once two passes
    find nothing left to move. Returns whether it is gone."""
    split = await _split(bus, bucket)
    legacy, _ = await split.legacy(fresh=True)
    if legacy is None:
        return True
    since = await mark_moving(bus, bucket)
    wait = since + split_kv.REFRESH + 1.0 - time.time()
    if wait > 0:  # until no process writes there any more as if nothing moved
        await asyncio.sleep(wait)
    await split.legacy(fresh=True)
    total = 0
    for _ in range(5):
        moved, left = await split.move_all()
        total += moved
        if moved == 0 and left == 0:
            break
    else:
        log.warning("KV bucket %s: records are still written there; kept (provision again)", bucket)
        return False
    await bus.js.delete_stream(f"KV_{bucket}")
    split._legacy_gone()
    log.info("KV bucket %s removed: its %d record(s) moved to the buckets per partition", bucket, total)
    return True
