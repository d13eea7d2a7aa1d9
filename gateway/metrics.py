"""`GET /metrics`: the whole installation's Prometheus metrics, from one scrape target.

Every Antler process publishes its registry on the bus (`bus.metrics_feed`); the gateway merges
the live ones (each sample labelled with its `process`, `host:pid`), its own read directly, and
adds what JetStream counts per durable (pending, unsettled, redelivered) and `antler_runs_pending`.
So one scrape sees runners, executors, brokers and adapters on every machine, and nothing needs a
port of its own. Admins only: the counts are everybody's (a Prometheus sends an admin token,
`authorization: {credentials: ...}` in its scrape config; deploy/prometheus.yml).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest

from bus.metrics_feed import MetricsBoard, consumer_families, runs_pending
from gateway.deps import GW, Me

router = APIRouter()


class _Families:
    """A one-shot collector over families already gathered (what `generate_latest` reads)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format 0.0.4"},
        403: {"description": "Not an admin."},
    },
)
async def metrics(gw: GW, me: Me) -> Response:
    """Every live process's metrics, merged, plus each durable's JetStream counts."""
    if not gw.auth.is_admin(me):
        raise HTTPException(403, "only an admin may read the installation's metrics")
    consumers = await consumer_families(gw.bus)
    board = gw.board or MetricsBoard(gw.bus)  # (not listening: this process only)
    families = [*board.families(local=True), *consumers, runs_pending(consumers)]
    return Response(generate_latest(_Families(families)), media_type=CONTENT_TYPE_LATEST)
