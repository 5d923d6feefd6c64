"""A server's credential written as JSON inside one argument or value (``--config
'{"apiKey": "..."}'``, as some launchers take their options) is masked as the same key would be
in the entry itself; the option spellings ``--token=abc`` and ``-t abc`` and URLs of any scheme
stay masked."""

from __future__ import annotations

import json

import pytest
from bridge_core.redaction import Redactor, entry_secrets

TOKEN = "sk-live-4f9a8b7c6d5e"
WORD = "correcthorsebattery"  # a password that looks like a plain word


@pytest.mark.parametrize(
    ("entry", "secret"),
    [
        ({"command": "npx", "args": ["run", "--config", json.dumps({"apiKey": TOKEN})]}, TOKEN),
        ({"command": "npx", "args": ["--config", json.dumps({"password": WORD})]}, WORD),
        ({"command": "x", "args": [json.dumps({"auth": {"headers": [{"token": WORD}]}})]}, WORD),
        ({"command": "x", "env": {"CONFIG": json.dumps({"api_key": WORD})}}, WORD),
        ({"command": "x", "args": [f"--config={json.dumps({'secret': WORD})}"]}, WORD),
        ({"command": "x", "args": ["--token=" + TOKEN]}, TOKEN),
        ({"command": "x", "args": ["-t", TOKEN]}, TOKEN),
        ({"command": "mysql", "args": ["-uroot", "-p" + TOKEN]}, TOKEN),
        ({"url": f"redis://:{WORD}@cache:6379/0"}, WORD),
        ({"url": f"wss://host/mcp?access_token={WORD}"}, WORD),
        ({"command": "x", "args": [f"git+https://x-access-token:{WORD}@github.com/o/r"]}, WORD),
    ],
    ids=[
        "json-arg-token", "json-arg-password-word", "json-nested", "json-in-env",
        "json-after-equals", "token-equals", "dash-t", "glued-short-option", "redis-url",
        "wss-query", "git-url",
    ],
)  # fmt: skip
def test_a_secret_in_an_argument_or_value_is_masked_whatever_its_wrapping(
    entry: dict[str, object], secret: str
) -> None:
    shown = Redactor(entry_secrets(entry)).text(json.dumps(entry))
    assert secret not in shown


def test_short_options_with_plain_values_glued_on_stay_readable() -> None:
    entry = {"command": "java", "args": ["-Xmx512m", "-v", "-Dlevel=info", "-jar", "/srv/x.jar"]}
    assert entry_secrets(entry) == set()


def test_json_that_holds_no_secret_is_left_readable() -> None:
    entry = {"command": "x", "args": ["--config", json.dumps({"root": "/data", "depth": 3})]}
    assert entry_secrets(entry) == set()
