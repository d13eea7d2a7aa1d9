"""deploy/: the Prometheus scrape config and the Grafana dashboard ask only for metrics Antler serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

import bus.metrics  # noqa: F401  (registers the families)
from bus.metrics import REGISTRY

REPO = Path(__file__).resolve().parent.parent
SERVED_BY_THE_GATEWAY = {
    "antler_process_info",
    "antler_runs_pending",
    "antler_consumer_pending_messages",
    "antler_consumer_ack_pending_messages",
    "antler_consumer_redelivered_messages",
}
SUFFIXES = ("_total", "_bucket", "_sum", "_count")
FUNCTIONS = {"sum", "rate", "histogram_quantile"}


def served() -> set[str]:
    names = set(SERVED_BY_THE_GATEWAY)
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES)
    return names


def test_every_dashboard_query_names_a_metric_antler_serves() -> None:
    dashboard = json.loads((REPO / "deploy" / "grafana" / "dashboards" / "antler.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert exprs
    known = served()
    for expr in exprs:
        # Label lists (`by (...)`, `on (...)`) and matchers (`{...}`) name labels, not metrics.
        bare = re.sub(r"\b(by|on|group_left|without)\s*\([^)]*\)|\{[^}]*\}", " ", expr)
        names = set(re.findall(r"\b[a-z][a-z_]+\b", bare)) - FUNCTIONS
        metrics = {n for n in names if n.startswith(("antler_", "gen_ai_", "process_"))}
        assert metrics, expr
        assert metrics <= known, f"{expr}: {sorted(metrics - known)}"


def test_prometheus_scrapes_the_gateways_metrics_with_a_token() -> None:
    config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert job["static_configs"] == [{"targets": ["gateway:2026"]}]
