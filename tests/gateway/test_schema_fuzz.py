"""Property-based API test: schemathesis sends what the gateway's OpenAPI schema allows, the gateway
answers without a 5xx, with a status code the schema declares and a body that matches its schema.

The gateway runs for real (uvicorn on 127.0.0.1, a runner and a sandbox broker on the test's
nats-server, the fake model), as in the other gateway tests. Schemathesis calls it over HTTP with
`requests`, which blocks, so the cases run in a worker thread while the event loop serves them
(its ASGI transport would run the app on another event loop than the one its NATS client is on).

Every operation of the schema is fuzzed, the streaming ones (SSE runs and joins, `/wait`) too:
schemathesis checks each SSE event against the declared event schema, and streams end when their
run ends. Each operation is fuzzed with valid requests and with invalid ones (schemathesis'
negative mode: those must be 4xx with the declared error body, never a 5xx). An operation with
thread or run ids in its path is fuzzed twice with valid requests: with generated ids (which name
nothing: 404s) and with the ids of a thread and a finished run the caller has, so that state
updates, history, runs, uploads and the rest meet real records; its invalid requests carry the
caller's ids only (the ids are plain strings, so what is invalid is in the body or the query, and
a handler refusing it after finding the record is the one place such a request goes further than
validation). Examples are bounded per operation (3) and derandomized: the test takes the same
time, and finds the same things, on every run (`ANTLER_FUZZ_EXAMPLES` raises the bound for a
longer hunt; test_schema_conformance sends every operation's boundary cases besides).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from tests.fakes.openai_server import FakeOpenAI

EXAMPLES_PER_OPERATION = int(os.environ.get("ANTLER_FUZZ_EXAMPLES", "3"))
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
TOKEN = {"x-api-key": "tok-ana"}
POSITIVE = GenerationMode.POSITIVE


def run_examples(
    operation: APIOperation, base_url: str, mode: GenerationMode, path_parameters: dict[str, str]
) -> None:
    # A LangGraph SDK method Antler does not offer answers its documented 501 (what to use instead).
    not_offered = "501" in operation.definition.raw.get("responses", {})
    checks = [check for check in CHECKS if not (not_offered and check is not_a_server_error)]

    @given(case=operation.as_strategy(mode, path_parameters=path_parameters or None))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Case) -> None:
        response = case.call(base_url=base_url, headers=TOKEN, timeout=30)
        case.validate_response(response, checks=checks, headers=TOKEN)

    check()


def fuzz(spec: dict[str, Any], base_url: str, known: dict[str, str]) -> dict[str, str]:
    """Run every operation's examples: what failed, by operation, ids and mode (schemathesis reports
    the distinct failures it found in each)."""
    schema = schemathesis.openapi.from_dict(spec)
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: op.method.upper() == "DELETE")  # what they delete, others still use
    failures: dict[str, str] = {}
    for operation in operations:
        in_path = set(re.findall(r"\{(\w+)", operation.path))
        passes: dict[str, dict[str, str]] = {"generated ids": {}}
        if ours := {name: value for name, value in known.items() if name in in_path}:
            passes["ana's ids"] = ours
        # Invalid requests need a body or a query to be invalid in: path ids and headers are strings.
        modes = list(GenerationMode) if len(operation.body) or len(operation.query) else [POSITIVE]
        for (ids, path_parameters), mode in itertools.product(passes.items(), modes):
            if mode != POSITIVE and ids == "generated ids" and len(passes) > 1:
                continue  # refused before any lookup, as with the caller's ids: the same requests
            try:
                run_examples(operation, base_url, mode, path_parameters)
            except Unsatisfiable:
                pass  # nothing here schemathesis can make invalid after all
            except (Exception, BaseExceptionGroup) as exc:  # schemathesis groups what it found
                failures[f"{operation.label} ({ids}, {mode.value})"] = f"{type(exc).__name__}: {exc}"[:3000]
    return failures


# schemathesis' own strategies use `random`, which this Hypothesis version frowns upon.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@pytest.mark.timeout(300)  # a few hundred generated requests; slow on a busy machine, not wrong
async def test_the_gateway_answers_whatever_its_schema_allows_as_its_schema_says(
    api_url: str, fake_model: FakeOpenAI
) -> None:
    async with httpx.AsyncClient(base_url=api_url, headers=TOKEN, timeout=30) as http:
        spec = (await http.get("/openapi.json")).json()
        thread = (await http.post("/api/threads", json={})).json()["thread_id"]
        body = {"input": {"messages": [{"role": "user", "content": "Hi"}]}}
        waited = await http.post(f"/api/threads/{thread}/runs/wait", json=body)
        run = waited.headers["location"].split("/")[-2]
    known = {"thread_id": thread, "run_id": run}
    failures = await asyncio.to_thread(fuzz, spec, api_url, known)
    assert not failures, "\n\n".join(f"{label}\n{failure}" for label, failure in failures.items())
