"""The OpenAPI document and the gateway's behaviour agree, as schemathesis' conformance checks see it.

`test_schema_fuzz` sends generated requests through Hypothesis; this one runs schemathesis itself
(its command line, as an API's users would) in its `examples` and `coverage` phases, which send the
boundary cases: methods a path lacks and OPTIONS (the `Allow` header must list exactly the
documented methods), each parameter and body field just inside and just outside its schema (valid
requests must not be refused with 400/422, invalid ones must be). Every check runs (`all`), on a
bounded, deterministic set of examples, against the real gateway of the other tests.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.langgraph_unsupported import UNSUPPORTED

pytestmark = pytest.mark.asyncio

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# Some answers depend on what exists, not on the request's shape, so a schema-valid request may
# still be refused with its reason: a `.skill` upload must be a zip archive (400), a state
# update `as_node` must name a node of the agent's graph (422), a compaction's `model_name`
# a configured model (422), and a scheduled task's schedule one the scheduler and the NATS server
# can fire (a cron expression, a zone, the words of /schedule: 422).
REFUSED_WITH_422 = [
    "POST /api/threads/{thread_id}/state",
    "POST /api/threads/{thread_id}/compact",
    "POST /api/scheduled-tasks",
    "PATCH /api/scheduled-tasks/{task_id}",
    "POST /api/scheduled-tasks/from-text",
    # A role must be one config.yaml defines; the audit trail's since/until a time (ISO 8601 with a
    # zone, or an age such as 2h), read as `antler audit` reads them (422 naming the field).
    "PUT /api/v1/roles/{user_id}",
    "GET /api/v1/audit",
    # Runs to cancel are named (`run_ids`) or a thread's by `status`: a body naming neither is a 422.
    "POST /api/runs/cancel",
]
CONFIG = (
    """
[[operations]]
include-name = "POST /api/skills/install"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "413"]

# The operations that start runs get their invalid requests here (each must be refused); a valid one
# starts a real run, and the coverage phase sends hundreds of those per operation (about half of the
# suite's CPU for this test alone): their valid requests are test_schema_fuzz's, with real ids.
[[operations]]
include-name-regex = "^POST /api/(threads/[^/]+/)?runs(/wait|/stream)?$"
generation.mode = "negative"
"""
    + "".join(
        f'[[operations]]\ninclude-name = "{operation}"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]\n'
        for operation in REFUSED_WITH_422
    )
    + "".join(  # LangGraph SDK methods Antler does not offer: a documented 501 saying what to use instead
        f'[[operations]]\ninclude-name = "{verb} /api{path}"\n'
        'checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "501"]\n'
        'checks.positive_data_acceptance.expected-statuses = ["401", "501"]\n'
        for verb, path, _method, _instead in UNSUPPORTED
    )
)


@pytest.mark.timeout(400)  # about a thousand requests; slow on a busy machine, not wrong
async def test_the_gateway_behaves_as_its_openapi_document_says(api_url: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        str(SCHEMATHESIS), "--config-file", str(config), "run", f"{api_url}/openapi.json",
        "--header", "x-api-key: tok-ana",
        "--checks", "all",
        "--phases", "examples,coverage",
        "--max-examples", "3",
        "--generation-deterministic",
        "--suppress-health-check", "all",
        "--request-timeout", "60",
        "--no-color",
    ]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, check=False, cwd=tmp_path, timeout=360
    )
    report = done.stdout + done.stderr
    failures = report[report.find("=== FAILURES ===") :] if "FAILURES" in report else report[-4000:]
    assert done.returncode == 0, failures[:20000]
