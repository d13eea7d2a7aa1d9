"""Reading SKILL.md files: bounded work whatever their frontmatter says, one bad skill skipped alone."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from skills import load_skills
from tests.conftest import REPO
from tests.support.skill_files import ALIAS_BOMB

GOOD = "---\nname: slides\ndescription: Make slides\n---\nUse an outline.\n"

# Loads the skills under argv[1] in a process of at most 2 GB of address space (what flattening the
# bomb would take is 9 GB), and prints the names found and the process' peak RSS.
PROBE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from skills import load_skills
names = [s.name for s in load_skills(sys.argv[1])]
# VmHWM, not ru_maxrss: the latter keeps the forking pytest worker's peak across exec.
status = open("/proc/self/status").read()
peak_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
print(json.dumps({"names": names, "peak_kb": peak_kb}))
"""


def skill(root: Path, folder: str, text: str, category: str = "custom") -> None:
    (root / category / folder).mkdir(parents=True, exist_ok=True)
    (root / category / folder / "SKILL.md").write_text(text)


def test_an_alias_bomb_is_skipped_with_bounded_memory_and_the_other_skills_load(tmp_path: Path) -> None:
    skill(tmp_path, "slides", GOOD)
    skill(tmp_path, "bomb", ALIAS_BOMB)
    assert len(ALIAS_BOMB.encode()) < 600
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["names"] == ["slides"]
    assert found["peak_kb"] < 400 * 1024, "reading a 500-byte file took hundreds of MB"
    assert "aliases are not allowed" in done.stderr


@pytest.mark.parametrize(
    ("frontmatter", "reason"),
    [
        pytest.param("name: x\ndescription: [a, b]\n", "description", id="description-list"),
        pytest.param("name: x\ndescription: {a: b}\n", "description", id="description-mapping"),
        pytest.param(f"name: x\ndescription: {'y' * 2000}\n", "description", id="description-too-long"),
        pytest.param("name: [x]\ndescription: d\n", "name", id="name-list"),
        pytest.param("name: x\ndescription: d\nlicense: {a: 1}\n", "license", id="license-mapping"),
        pytest.param("name: x\ndescription: d\nallowed-tools: {a: 1}\n", "allowed", id="tools-mapping"),
        pytest.param(f"name: x\ndescription: d\nnotes: '{'z' * 20000}'\n", "KB", id="frontmatter-too-big"),
        pytest.param("name: x\ndescription: " + "[" * 5000, "nests too deep", id="deep-nesting"),
    ],
)
def test_a_skill_whose_frontmatter_has_wrong_types_or_sizes_is_skipped_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, frontmatter: str, reason: str
) -> None:
    skill(tmp_path, "slides", GOOD)
    skill(tmp_path, "x", f"---\n{frontmatter}\n---\nBody.\n")
    with caplog.at_level(logging.WARNING, logger="skills.loader"):
        found = load_skills(tmp_path)
    assert [s.name for s in found] == ["slides"]
    skipped = [r.getMessage() for r in caplog.records if "x/SKILL.md" in r.getMessage()]
    assert skipped, "the skipped skill is logged"
    assert reason in skipped[0]


def test_an_oversized_skill_md_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    skill(tmp_path, "slides", GOOD)
    skill(tmp_path, "huge", "---\nname: huge\ndescription: d\n---\n" + "words " * 100_000)
    with caplog.at_level(logging.WARNING, logger="skills.loader"):
        assert [s.name for s in load_skills(tmp_path)] == ["slides"]
    assert any("SKILL.md is over" in r.getMessage() for r in caplog.records)
