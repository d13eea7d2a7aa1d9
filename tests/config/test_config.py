"""config.yaml and extensions_config.json: search order, $ENV values, error messages, the example."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from config import (
    AppConfig,
    ConfigFileNotFoundError,
    ConfigParseError,
    ConfigValidationError,
    ExtensionsConfig,
    MissingEnvError,
    load_config,
    load_extensions,
    read_raw_extensions,
    write_extensions_config,
)

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data) if path.suffix == ".yaml" else json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ANTLER_CONFIG_PATH", raising=False)
    monkeypatch.delenv("ANTLER_EXTENSIONS_CONFIG_PATH", raising=False)
    monkeypatch.chdir(tmp_path)


def test_no_file_at_all_gives_working_defaults() -> None:
    config = load_config()
    assert config.bus.url is None, "embedded server by default"
    assert config.bus.prefix == "antler"
    assert config.bus.data_dir == ".antler"
    assert config.gateway.host == "127.0.0.1"
    assert config.gateway.port == 2026
    assert config.models == []
    assert load_extensions().mcp_servers == {}


def test_search_order_is_explicit_then_env_var_then_current_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "config.yaml", {"bus": {"prefix": "from_cwd"}})
    assert load_config().bus.prefix == "from_cwd"

    env_file = write(tmp_path / "env.yaml", {"bus": {"prefix": "from_env"}})
    monkeypatch.setenv("ANTLER_CONFIG_PATH", str(env_file))
    assert load_config().bus.prefix == "from_env"

    explicit = write(tmp_path / "explicit.yaml", {"bus": {"prefix": "explicit"}})
    assert load_config(explicit).bus.prefix == "explicit"


def test_a_named_file_that_does_not_exist_is_an_error_not_silently_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigFileNotFoundError, match="given explicitly"):
        load_config(tmp_path / "nope.yaml")
    monkeypatch.setenv("ANTLER_CONFIG_PATH", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigFileNotFoundError, match=r"from \$ANTLER_CONFIG_PATH"):
        load_config()


def test_dollar_values_resolve_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-123")
    monkeypatch.setenv("TEST_GATEWAY_PORT", "8080")
    write(
        tmp_path / "config.yaml",
        {
            "models": [
                {"name": "m", "api_key": "$TEST_OPENAI_KEY", "default_headers": {"X-Key": "$TEST_OPENAI_KEY"}}
            ],
            "gateway": {"port": "$TEST_GATEWAY_PORT"},
        },
    )
    config = load_config()
    assert config.models[0].api_key == "sk-123"
    assert config.gateway.port == 8080, "typed fields get typed values"
    assert config.models[0].resolved_extra() == {"default_headers": {"X-Key": "sk-123"}}


def test_a_missing_variable_fails_only_when_its_value_is_used_and_names_field_and_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_UNSET_SLACK", raising=False)
    monkeypatch.delenv("TEST_UNSET_KEY", raising=False)
    path = write(
        tmp_path / "config.yaml",
        {
            "models": [{"name": "a", "api_key": "$TEST_UNSET_KEY"}, {"name": "b", "api_key": "plain"}],
            "channels": {"slack": {"bot_token": "$TEST_UNSET_SLACK"}},
        },
    )
    config = load_config()  # loading is fine: nobody used those values yet
    assert config.models[1].api_key == "plain", "other values of the same list are usable"
    with pytest.raises(MissingEnvError) as info:
        _ = config.models[0].api_key
    message = str(info.value)
    assert "models[0].api_key" in message
    assert "TEST_UNSET_KEY" in message
    assert str(path) in message
    with pytest.raises(MissingEnvError, match=r"channels\.slack\.bot_token.*TEST_UNSET_SLACK"):
        _ = config.channels.slack.bot_token

    monkeypatch.setenv("TEST_UNSET_KEY", "set-later")
    assert config.models[0].api_key == "set-later", "a variable exported after loading is picked up"


def test_missing_variables_inside_pass_through_values_are_reported_with_their_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_UNSET_HDR", raising=False)
    write(
        tmp_path / "config.yaml", {"models": [{"name": "m", "default_headers": {"X-A": "$TEST_UNSET_HDR"}}]}
    )
    with pytest.raises(MissingEnvError, match=r"models\[0\]\.default_headers\.X-A.*TEST_UNSET_HDR"):
        load_config().models[0].resolved_extra()


def test_validation_errors_name_the_file_every_bad_field_and_what_was_wrong(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        {
            "bus": {"prefix": "has.dots", "ack_wait_seconds": "soon", "ack_wiat": 3},
            "models": [{"name": "x", "use": "no_colon"}, {"display_name": "nameless"}],
            "summarization": {"trigger": [{"type": "fraction", "value": 3}]},
        },
    )
    with pytest.raises(ConfigValidationError) as info:
        load_config()
    text = str(info.value)
    assert text.startswith(f"{path}: 6 invalid fields")
    for expected in (
        "bus.prefix: must be one subject token",
        "bus.ack_wait_seconds: Input should be a valid number",
        "(got 'soon')",
        "bus.ack_wiat: unknown field",
        "models[0].use: must look like 'package.module:ClassName'",
        "models[1].name: Field required",
        "summarization.trigger[0]: a fraction must be between 0 and 1",
    ):
        assert expected in text


def test_duplicate_model_names_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", {"models": [{"name": "same"}, {"name": "same"}]})
    with pytest.raises(ConfigValidationError, match="two models are named 'same'"):
        load_config()


def test_postgres_checkpoints_without_a_database_url_are_refused_naming_the_field(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", {"runner": {"checkpointer": "postgres"}})
    with pytest.raises(ConfigValidationError, match=r"runner.*postgres_url"):
        load_config()


def test_acknowledged_means_fsynced_unless_an_operator_sets_a_duration(tmp_path: Path) -> None:
    assert load_config().bus.embedded.sync_interval == "always"
    write(tmp_path / "config.yaml", {"bus": {"embedded": {"sync_interval": "10s"}}})
    assert load_config().bus.embedded.sync_interval == "10s"
    write(tmp_path / "config.yaml", {"bus": {"embedded": {"sync_interval": "sometimes"}}})
    with pytest.raises(ConfigValidationError, match=r"bus\.embedded\.sync_interval.*always.*duration"):
        load_config()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("bus: [unclosed", "cannot parse", id="bad-yaml"),
        pytest.param("- just\n- a list\n", "top level must be a mapping", id="not-a-mapping"),
    ],
)
def test_unparseable_files_say_so(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigParseError, match=expected):
        load_config()


def test_the_default_model_is_the_first(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", {"models": [{"name": "first"}, {"name": "second"}]})
    config = load_config()
    default = config.get_model()
    assert default is not None
    assert default.name == "first"
    chosen = config.get_model("second")
    assert chosen is not None
    assert chosen.name == "second"
    assert config.get_model("third") is None


def test_extensions_load_like_deerflow_and_write_back_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_GH_TOKEN", "ghp_x")
    data = {
        "mcpServers": {
            "github": {
                "enabled": True,
                "type": "stdio",
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_TOKEN": "$TEST_GH_TOKEN"},
                "description": "GitHub",
            }
        },
        "skills": {"pdf": {"enabled": False}},
    }
    write(tmp_path / "extensions_config.json", data)
    ext = load_extensions()
    assert ext.mcp_servers["github"].command == "npx"
    assert ext.mcp_servers["github"].resolved("env") == {"GITHUB_TOKEN": "ghp_x"}
    assert ext.skill_enabled("pdf") is False
    assert ext.skill_enabled("not-mentioned") is True

    raw = read_raw_extensions(tmp_path / "extensions_config.json")
    raw["skills"]["pdf"]["enabled"] = True
    out = tmp_path / "out" / "extensions_config.json"
    write_extensions_config(raw, out)
    again = json.loads(out.read_text())
    assert again["mcpServers"]["github"]["env"] == {"GITHUB_TOKEN": "$TEST_GH_TOKEN"}, (
        "secrets stay references"
    )
    assert again["skills"]["pdf"]["enabled"] is True
    assert [p.name for p in out.parent.iterdir()] == ["extensions_config.json"], "no temp files left behind"
    with pytest.raises(ValidationError):
        write_extensions_config({"mcpServers": {"bad": {"type": "carrier-pigeon"}}}, out)
    assert json.loads(out.read_text()) == again, "an invalid config is not written"


def test_extensions_json_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "extensions_config.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(ConfigParseError, match=r"extensions_config\.json"):
        load_extensions()


# ------------------------------------------------------------------ the example file


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{prefix}.{key}" if prefix else key
        paths.append(path)
        inner = _section_type(field.annotation)
        if inner is not None:
            origin = typing.get_origin(field.annotation)
            shape = {list: "[0]", dict: ".*"}.get(origin, "")  # a list's first item, a mapping's first value
            paths += _field_paths(inner, f"{path}{shape}")
    return paths


def _section_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def _lookup(data: Any, path: str) -> bool:
    node = data
    for part in path.replace("[0]", ".0").split("."):
        if part == "*":
            if not isinstance(node, dict) or not node:
                return False
            node = next(iter(node.values()))
        elif isinstance(node, list):
            if not node:
                return False
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    return True


def test_config_example_documents_every_field_and_loads() -> None:
    example = REPO / "config.example.yaml"
    data = yaml.safe_load(example.read_text(encoding="utf-8"))
    missing = [p for p in _field_paths(AppConfig) if not _lookup(data, p)]
    assert missing == [], f"config.example.yaml does not document: {missing}"
    config = load_config(example)
    assert config.get_model() is not None


def test_extensions_example_documents_every_field_and_loads() -> None:
    example = REPO / "extensions_config.example.json"
    data = json.loads(example.read_text(encoding="utf-8"))
    missing = [p for p in _field_paths(ExtensionsConfig) if not _lookup(data, p)]
    assert missing == [], f"extensions_config.example.json does not document: {missing}"
    assert load_extensions(example).mcp_servers


# ------------------------------------------------------------------ the keyless web tools


def _tools(config: AppConfig) -> list[dict[str, Any]]:
    return [tool.model_dump() for tool in config.tools]


def test_a_config_without_a_tools_section_has_the_keyless_web_tools_of_the_example(tmp_path: Path) -> None:
    only_a_model = write(
        tmp_path / "config.yaml",
        {"models": [{"name": "m", "model": "m", "base_url": "http://127.0.0.1:1/v1"}]},
    )
    example = load_config(REPO / "config.example.yaml")
    for config in (load_config(only_a_model), load_config()):
        assert [t["name"] for t in _tools(config)] == ["web_search", "web_fetch", "image_search"]
        assert _tools(config) == _tools(example), "the defaults are the tools config.example.yaml shows"
        assert [g.name for g in config.tool_groups] == ["web"]


@pytest.mark.parametrize(
    ("listed", "names"),
    [
        pytest.param([], [], id="empty-list-means-none"),
        pytest.param(
            [{"name": "web_fetch", "use": "agents.tools.community.web_fetch:make_web_fetch"}],
            ["web_fetch"],
            id="one",
        ),
    ],
)
def test_a_config_that_lists_tools_keeps_exactly_its_list(
    tmp_path: Path, listed: list[dict[str, str]], names: list[str]
) -> None:
    config = load_config(write(tmp_path / "config.yaml", {"tools": listed}))
    assert [t.name for t in config.tools] == names
