"""What non-admins see of MCP settings: the spellings of secrets `gateway.rest.redact` hides."""

from __future__ import annotations

import pytest

from gateway.rest.redact import redact, redact_args, redact_text, redact_url


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        pytest.param(["--token=abc"], ["--token=***"], id="flag-equals"),
        pytest.param(["--api-key", "a", "--port", "8"], ["--api-key", "***", "--port", "8"], id="flag-value"),
        pytest.param(["--password", "$PW"], ["--password", "$PW"], id="reference-kept"),
        pytest.param(["-e", "OPENAI_API_KEY=sk-x"], ["-e", "OPENAI_API_KEY=***"], id="env-style"),
        pytest.param(["xoxb-123-456"], ["***"], id="token-shape"),
        pytest.param(["Bearer abc"], ["***"], id="bearer"),
        pytest.param(["--url=https://u:p@h/?sig=s"], ["--url=https://***@h/?sig=***"], id="flag-url"),
        pytest.param(["serve", "--verbose", "/data"], ["serve", "--verbose", "/data"], id="harmless"),
    ],
)  # fmt: skip
def test_secrets_in_arguments_are_hidden(args: list[str], shown: list[str]) -> None:
    assert redact_args(args) == shown


def test_urls_lose_their_userinfo_and_secret_query_values() -> None:
    assert redact_url("https://user:pw@h.example:8443/p?access_token=t&page=2") == (
        "https://***@h.example:8443/p?access_token=***&page=2"
    )
    assert redact_url("https://h.example/p?token=$TOKEN") == "https://h.example/p?token=$TOKEN"


def test_an_error_text_quoting_a_command_line_or_url_is_redacted() -> None:
    text = "cannot start 'npx --token=abc srv': GET http://u:pw@127.0.0.1:9/?key=k refused"
    assert (
        redact_text(text) == "cannot start 'npx --token=*** srv': GET http://***@127.0.0.1:9/?key=*** refused"
    )


def test_mappings_hide_secret_keys_and_every_env_or_header_value() -> None:
    server = {
        "env": {"A": "x", "B": "$B"},
        "headers": {"Accept": "json"},
        "oauth": {"client_id": "id", "client_secret": "s", "token_url": "http://t/"},
        "description": "GitHub",
    }
    assert redact(server) == {
        "env": {"A": "***", "B": "$B"},
        "headers": {"Accept": "***"},
        "oauth": {"client_id": "id", "client_secret": "***", "token_url": "http://t/"},
        "description": "GitHub",
    }
