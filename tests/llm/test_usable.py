"""Whether Antler has a model it can use (`llm.usable`), as the runner reports it and `antler up`
tells a newcomer: the README's blocks give one; none, or one missing its key, is said plainly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from config import load_config
from llm.usable import model_problem
from tests.conftest import REPO
from tests.support.doc_blocks import fenced_blocks

README = REPO / "README.md"


def first_turn_blocks() -> list[str]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("## A first turn") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    return [b.code for b in fenced_blocks(README) if b.lang == "yaml" and start <= b.line <= end]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTLER_CONFIG_PATH", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


def test_the_readmes_local_server_block_is_a_model_antler_can_use_as_written(here: Path) -> None:
    blocks = first_turn_blocks()
    assert len(blocks) == 2, "a hosted endpoint and a server on one's own machine"
    local = yaml.safe_load(blocks[1])
    assert local["models"][0]["base_url"].startswith("http://127.0.0.1:")
    (here / "config.yaml").write_text(blocks[1], encoding="utf-8")
    assert model_problem(load_config(), build=True) is None, "the provider takes it as written"


def test_the_readmes_hosted_block_names_the_key_it_still_needs(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (here / "config.yaml").write_text(first_turn_blocks()[0], encoding="utf-8")
    problem = model_problem(load_config())
    assert problem is not None
    assert "export OPENAI_API_KEY=" in problem.reason
    monkeypatch.setenv("OPENAI_API_KEY", "sk-anything")
    assert model_problem(load_config(), build=True) is None


def test_no_model_says_which_file_and_what_to_add(here: Path) -> None:
    problem = model_problem(load_config())
    assert problem is not None
    assert problem.reason.startswith("no model configured: add a `models:` entry to ")
    assert str(here / "config.yaml") in problem.advice
    pasted = yaml.safe_load("\n".join(line for line in problem.advice.splitlines() if line.startswith("  ")))
    assert pasted["models"][0]["base_url"], "with the endpoint"


def test_a_provider_that_is_not_installed_is_named(here: Path) -> None:
    models = [{"name": "m", "use": "no_such_provider_pkg:Chat", "model": "x"}]
    (here / "config.yaml").write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    problem = model_problem(load_config())
    assert problem is not None
    assert "no_such_provider_pkg" in problem.reason
