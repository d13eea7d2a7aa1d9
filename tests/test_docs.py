"""The docs tell the truth: their shell commands run as written, and their links lead somewhere.

How to mark a fenced block in README.md or docs/*.md (the convention this test enforces):

- A ```` ```sh ```` or ```` ```bash ```` block is run as written by `bash -e` in a fresh copy of
  the repository (its tracked and untracked, not ignored, files), with the project's
  virtualenv linked as `.venv` and its `bin/` first on `PATH` (as after `. .venv/bin/activate`).
  It must exit 0.
- `<!-- needs-antler -->` on the line before the fence: the block is run instead in the
  directory of a running `antler up` (the tests' shared one, on its defaults with a scripted
  model), as a reader would in a second terminal. Password prompts (`Password:`, `Again:`) are
  answered.
- `<!-- no-test: <reason> -->` on the line before the fence: the block is not run, because it
  needs something tests do not have (a platform token, Docker, a NATS cluster) or runs until
  Ctrl-C. The reason is required and says which.
- Output shown to the reader goes in ```` ```text ```` blocks (other languages are never run).

Every relative link and image (`[..](path#anchor)`, `src="..."`) must name an existing file,
and an anchor a heading of the Markdown file it points into (GitHub's slugs). Every repository
path the docs name (`bus/leases.py`, `tests/faults/`, in code or prose) must exist, unless
.gitignore names it (a file a command writes, such as `antler creds --out deploy`'s).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_blocks import (
    DOCS,
    FENCE,
    MARKER,
    REPO,
    SHELLS,
    VENV,
    Block,
    fenced_blocks,
    reader_env,
    run_block,
)
from tests.support.shared_up import GROUP, SharedUp


def shell_blocks() -> list[Block]:
    return [b for path in DOCS for b in fenced_blocks(path) if b.lang in SHELLS]


def _params(marker: str | None) -> list[object]:
    return [pytest.param(b, id=b.id) for b in shell_blocks() if b.marker == marker]


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as a fresh clone has it (plus uncommitted files), and `.venv`."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copy = tmp_path_factory.mktemp("repo")
    for name in filter(None, listing.split("\0")):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name, follow_symlinks=False)
    (copy / ".venv").symlink_to(VENV)
    return copy


@pytest.mark.parametrize("block", _params(None))
def test_shell_block_runs_as_written(block: Block, repo_copy: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "checkout"
    shutil.copytree(repo_copy, workdir, symlinks=True)
    code, output = run_block(block, workdir, reader_env(workdir))
    assert code == 0, f"{block.id} exited {code}:\n{block.code}\n--- output ---\n{output}"


# --- blocks that need a running Antler -----------------------------------------------------------


@pytest.mark.xdist_group(GROUP)
@pytest.mark.asyncio(loop_scope="session")  # SHARED_UP
async def test_blocks_that_need_antler_run_against_a_running_antler(shared_up: SharedUp) -> None:
    """All of them in the directory of the shared `antler up` (tests/support/shared_up.py), a reader's
    second terminal: its config.yaml, its data dir and the reader's `.venv`."""
    venv = shared_up.workdir / ".venv"
    if not venv.is_symlink():
        venv.symlink_to(VENV)
    blocks = [b for b in shell_blocks() if b.marker == "needs-antler"]
    failures = []
    async with shared_up.accounts_left_as_found():  # `antler user add you@example.com` is one
        for block in blocks:
            # In a thread: the scripted model answers on this loop meanwhile.
            code, output = await asyncio.to_thread(run_block, block, shared_up.workdir, reader_env(REPO))
            if code != 0:
                failures.append(f"{block.id} exited {code}:\n{block.code}--- output ---\n{output}")
    assert not failures, "\n\n".join(failures)


# --- the convention itself -----------------------------------------------------------------------


def test_every_block_not_run_says_why() -> None:
    unexplained = [b.id for b in shell_blocks() if b.marker == "no-test" and not b.reason.strip()]
    assert not unexplained, f"<!-- no-test: ... --> needs a reason: {unexplained}"


def test_the_lint_commands_the_docs_give_are_what_make_test_runs() -> None:
    """docs/development.md's lint block is not run again (mypy alone is half a minute of CPU):
    `make test` runs the Makefile's `lint` recipe before the suite, so it must say the same."""
    block = next(b for b in shell_blocks() if b.id.startswith("docs/development.md") and "mypy" in b.code)
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None, "the Makefile has a lint target"
    commands = [line.strip().replace("$(BIN)/", ".venv/bin/") for line in recipe.group(1).splitlines()]
    assert block.code.strip().splitlines() == commands


def test_markers_stand_before_shell_blocks() -> None:
    """A marker before a block that is never run (or before no block) is a mistake to catch."""
    misplaced = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        starts = {b.line - 1: b for b in fenced_blocks(path)}
        for number, line in enumerate(lines):
            if MARKER.match(line.strip()) and (
                number + 1 not in starts or starts[number + 1].lang not in SHELLS
            ):
                misplaced.append(f"{path.relative_to(REPO)}:{number + 1}")
    assert not misplaced, f"markers not right before a sh/bash block: {misplaced}"


# --- links -------------------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HTML_REF = re.compile(r"""(?:src|href)=["'](?P<target>[^"']+)["']""")
_HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


def outside_fences(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines outside fenced blocks, with their numbers."""
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening["fence"]
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
        else:
            yield number, line


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in outside_fences(path):
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading["title"])
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links() -> list[tuple[Path, int, str]]:
    links = []
    for path in DOCS:
        for number, text in outside_fences(path):
            line = re.sub(r"`[^`]*`", "``", text)  # a path in inline code is not a link
            for match in [*_LINK.finditer(line), *_HTML_REF.finditer(line)]:
                target = match["target"]
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:, ...
                    continue
                links.append((path, number, target))
    return links


def test_the_docs_have_links_to_check() -> None:
    assert len(relative_links()) > 20
    assert len(_params(None)) >= 3
    assert len(_params("needs-antler")) >= 3


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    broken = []
    for path, number, target in relative_links():
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(REPO)}:{number}: {target}"
        if not destination.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{where} (no heading #{anchor} in {destination.relative_to(REPO)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


# A repository path as the docs write one: `bus/leases.py`, `tests/faults/`, gateway/webui/static/
# (in code or in prose), starting with a top-level directory of the repository. Placeholders
# (`<name>`, `*`, `{id}`, `…`) make a pattern, not a path, and are not checked.
_PATH = re.compile(r"(?<![\w./~$-])(?P<path>(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]*)(?P<rest>[<*{…]?)")
_TOP_DIRS = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}


def repository_paths() -> list[tuple[Path, int, str]]:
    found = []
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _PATH.finditer(line):
                named = match["path"].rstrip(".")
                if match["rest"] or named.split("/", 1)[0] not in _TOP_DIRS or ".venv" in named:
                    continue
                found.append((path, number, named))
    return found


def test_the_docs_name_repository_paths_to_check() -> None:
    named = {p for _, _, p in repository_paths()}
    assert {"bus/leases.py", "tests/faults/", "llm/budget.py"} <= named


def ignored_by_git(paths: set[str]) -> set[str]:
    """The paths .gitignore names: what a command writes (`antler creds --out deploy`), not the repository."""
    if not paths:
        return set()
    listed = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(sorted(paths)),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    return set(listed.stdout.split())


def test_every_repository_path_the_docs_name_exists() -> None:
    named = repository_paths()
    absent = {p for _, _, p in named if not (REPO / p).exists()}
    written_by_commands = ignored_by_git(absent)
    missing = [
        f"{path.relative_to(REPO)}:{number}: {p}"
        for path, number, p in named
        if p in absent and p not in written_by_commands
    ]
    assert not missing, "the docs name paths the repository does not have:\n" + "\n".join(missing)
