"""The sandbox's toolbox: sandboxed `python3` finds its packages, `antler sandbox install` builds it
once per package list and installation, `antler sandbox doctor` says what a command gets."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from config import AppConfig
from sandbox import SandboxClient
from sandbox.toolbox import ENV_PATH, STAMP, Toolbox
from tests.conftest import finished, run_antler
from tests.support.sandbox import PROVIDERS, needs_bwrap, running_broker


def tiny_wheel(folder: Path, name: str = "antler_probe", version: str = "1.0") -> Path:
    """A pure-Python wheel made on the spot, so installing it needs no package index."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": "ANSWER = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_sandboxed_python3_finds_the_toolbox_packages_and_draws_a_png(
    provider: str,
    make_config: Callable[..., AppConfig],
    toolbox: Toolbox,
    nats_url: str,
    client: SandboxClient,
) -> None:
    config = make_config(provider=provider, toolbox={"path": str(toolbox.root)})
    # A relative path: the local provider maps virtual paths in commands only.
    script = (
        "import matplotlib.pyplot as plt, pandas, docx, pptx, openpyxl, pypdf, numpy\n"
        "frame = pandas.DataFrame({'x': [1, 2, 3], 'y': [2, 4, 8]})\n"
        "frame.plot(x='x', y='y').figure.savefig('../outputs/p.png')\n"
        "print('pandas', pandas.__version__)\n"
    )
    async with running_broker(nats_url, config):
        await client.write_file("/mnt/user-data/workspace/p.py", script)
        result = await client.exec("command -v python3; python3 p.py")
        png = await client.read_binary("/mnt/user-data/outputs/p.png")
    assert result.exit_code == 0, result.output
    found = result.output.splitlines()
    expected = (
        "/opt/toolbox/python/bin/python3" if provider == "bwrap" else f"{toolbox.python_dir}/bin/python3"
    )
    assert found[0] == expected
    assert found[-1].startswith("pandas ")
    assert base64.b64decode(png.content)[:8] == b"\x89PNG\r\n\x1a\n"


@needs_bwrap
async def test_without_the_toolbox_sandboxed_python3_is_the_bare_system_one(
    make_config: Callable[..., AppConfig], nats_url: str, client: SandboxClient, tmp_path: Path
) -> None:
    config = make_config(provider="bwrap", toolbox={"path": str(tmp_path / "nothing-here")})
    async with running_broker(nats_url, config):
        result = await client.exec("python3 -c 'import pptx'")
    assert result.exit_code != 0
    assert "No module named 'pptx'" in result.output


def write_config(tmp_path: Path, toolbox: dict[str, Any]) -> Path:
    config = tmp_path / "config.yaml"
    data = {"bus": {"data_dir": str(tmp_path / "data")}, "sandbox": {"provider": "local", "toolbox": toolbox}}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    return config


async def test_install_builds_once_per_package_list_and_the_sandbox_uses_the_new_one(
    tmp_path: Path, make_config: Callable[..., AppConfig], nats_url: str, client: SandboxClient
) -> None:
    wheel = tiny_wheel(tmp_path)
    root = tmp_path / "box"
    config = write_config(tmp_path, {"path": str(root), "python_packages": []})
    code, _, err = await finished(await run_antler("sandbox", "install", "-c", str(config)), 120)
    assert code == 0, err
    assert "installing the sandbox toolbox" in err
    stamp = (root / "python" / STAMP).read_text()

    code, _, err = await finished(await run_antler("sandbox", "install", "-c", str(config)), 120)
    assert code == 0, err
    assert "sandbox toolbox up to date" in err
    assert "installing" not in err, "a current toolbox is not built again"
    assert (root / "python" / STAMP).read_text() == stamp

    config = write_config(tmp_path, {"path": str(root), "python_packages": [str(wheel)]})
    code, _, err = await finished(await run_antler("sandbox", "install", "-c", str(config)), 300)
    assert code == 0, err
    assert "installing the sandbox toolbox" in err, "a new package list builds a new toolbox"
    assert not list(root.glob("python.*")), "the old one and the build folder are gone"
    async with running_broker(nats_url, make_config(toolbox={"path": str(root)})):
        result = await client.exec("python3 -c 'import antler_probe; print(antler_probe.ANSWER)'")
    assert result.output.strip() == "42"


async def test_doctor_says_what_sandboxed_commands_get(toolbox: Toolbox, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"path": str(toolbox.root)})
    code, out, err = await finished(await run_antler("sandbox", "doctor", "-c", str(config)), 120)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("sandbox: local (NOT isolated")
    assert f"toolbox: {toolbox.python_dir} (up to date)" in lines
    assert any(line.startswith("python: 3.") for line in lines)
    for package in ("pandas", "numpy", "matplotlib", "openpyxl", "python-pptx", "python-docx", "pypdf"):
        assert any(line.startswith(f"  {package} ") and "MISSING" not in line for line in lines), package
    assert any(line.startswith("node: ") for line in lines)

    missing = write_config(tmp_path, {"path": str(tmp_path / "none"), "python_packages": ["pandas"]})
    code, out, _ = await finished(await run_antler("sandbox", "doctor", "-c", str(missing)), 120)
    assert code == 1
    assert f"toolbox: not installed at {tmp_path / 'none' / 'python'} (run `antler sandbox install`)" in out
    assert "  pandas MISSING" in out


@needs_bwrap
async def test_a_node_outside_usr_is_mounted_read_only_and_found_first(
    make_config: Callable[..., AppConfig],
    nats_url: str,
    client: SandboxClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "node-v99"  # as nvm or a tarball install lays Node.js out
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "node").write_text("#!/bin/sh\necho v99.0.0-outside-usr\n")
    (home / "bin" / "node").chmod(0o755)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    # Offered with or without the Python part of the toolbox installed.
    config = make_config(provider="bwrap", toolbox={"path": str(tmp_path / "no-python-toolbox")})
    async with running_broker(nats_url, config):
        result = await client.exec("command -v node; node --version; touch /opt/toolbox/node/x 2>&1 || true")
    lines = result.output.splitlines()
    assert lines[:2] == ["/opt/toolbox/node/bin/node", "v99.0.0-outside-usr"]
    assert "Read-only file system" in lines[2]
    assert str(home) not in result.output


def test_with_no_path_set_an_installation_keeps_its_toolbox_and_a_current_one_in_the_users_cache_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another installation (its own sys.prefix): a new toolbox is built in that installation, for
    every data dir of it; a current one already in the user's cache is used rather than built again."""
    monkeypatch.delenv(ENV_PATH, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installation = tmp_path / "venv" / "share" / "antler" / "toolbox"
    cache = tmp_path / "cache" / "antler" / "toolbox"
    configs = [
        AppConfig.model_validate(
            {"bus": {"data_dir": str(tmp_path / d)}, "sandbox": {"toolbox": {"python_packages": []}}}
        )
        for d in ("data-1", "data-2")
    ]
    assert {Toolbox.from_config(c).root for c in configs} == {installation}, (
        "one place, whatever the data dir"
    )

    Toolbox(cache, ()).ensure()
    [chosen] = {Toolbox.from_config(c) for c in configs}
    assert chosen.root == cache
    assert chosen.current()
    assert chosen.shared
