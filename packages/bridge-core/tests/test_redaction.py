"""Which configured values are secrets, and how texts are masked (also where they were cut)."""

from __future__ import annotations

import json

import pytest
from bridge_core.redaction import (
    MASK,
    Redactor,
    configured_secrets,
    entry_secrets,
    is_secret_name,
)
from bridge_core.servers import ServerSpec


def _stdio(*args: str, env: dict[str, str] | None = None) -> ServerSpec:
    return ServerSpec(name="s", transport="stdio", command="srv", args=args, env=env or {})


def _http(url: str, headers: dict[str, str] | None = None) -> ServerSpec:
    return ServerSpec(name="s", transport="http", url=url, headers=headers or {})


@pytest.mark.parametrize(
    ("args", "secret"),
    [
        (("--api-key=sk-abc123DEF456",), "sk-abc123DEF456"),
        (("--token", "sk-two-arg-9876"), "sk-two-arg-9876"),
        (("--password", "hunter"), "hunter"),  # marked: a plain word is a secret here
        (("postgresql://user:pw1234567@db/app",), "pw1234567"),
        (("postgresql://user:pw1234567@db/app",), "postgresql://user:pw1234567@db/app"),
        (("https://api.example.com/v1?key=plainword",), "plainword"),
        (("https://ghp_abcdef123456@github.com/o/r",), "ghp_abcdef123456"),
        (("https://example.com/hooks/T0123/B4567/xyzSecret123",), "xyzSecret123"),
        (("-e", "GITHUB_TOKEN=ghp_xyz98765"), "ghp_xyz98765"),
        (("--header", "Authorization: Bearer plaintoken"), "plaintoken"),
        (("sk-positional-0123456789",), "sk-positional-0123456789"),
        (("randomlettersonlytokenabcdefghij",), "randomlettersonlytokenabcdefghij"),
        (("aBcDeFgHiJkL",), "aBcDeFgHiJkL"),
    ],
)
def test_secret_looking_argument_values_are_secrets(args: tuple[str, ...], secret: str) -> None:
    assert secret in configured_secrets(_stdio(*args))


def test_harmless_arguments_are_not_secrets() -> None:
    spec = _stdio(
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/tmp/data",
        "./relative/dir",
        "~/notes",
        "--local-timezone=America/New_York",
        "--port",
        "8080",
        "127.0.0.1:8080",
        "mcp-server-git==2025.1.1",
        "@scope/server@1.2.3",
        "stdio",
        "JavaScript",
        "https://mcp.example.com/sse",
        "--api-key-file",
        "/etc/keys/api.key",  # a path says where a secret is, it is none
    )
    assert configured_secrets(spec) == set()


def test_env_and_header_values_are_secrets_unless_plain_and_not_named_secret() -> None:
    spec = _stdio(
        env={
            "API_KEY": "abcdefgh",
            "MY_PW": "hunter",
            "TEAM_ID": "T01234567",
            "NODE_ENV": "production",
            "MEMORY_FILE_PATH": "/tmp/memory.json",
            "LOG_LEVEL": "info",
        }
    )
    assert configured_secrets(spec) == {"abcdefgh", "hunter", "T01234567"}
    http = _http(
        "http://127.0.0.1:8080/mcp",
        {"Authorization": "Bearer hdrsecret", "Accept": "application/json"},
    )
    assert configured_secrets(http) == {"Bearer hdrsecret", "hdrsecret"}


def test_http_url_tokens_in_path_query_and_userinfo_are_secrets() -> None:
    url = "https://u:pwsecret1@mcp.example.com/s/tok3nInPath9876/mcp?api_key=qs987654&mode=fast"
    found = configured_secrets(_http(url))
    assert {"pwsecret1", "tok3nInPath9876", "qs987654", url} <= found
    assert not {"mcp", "fast", "mcp.example.com"} & found


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        # Issue 34: a path parameter made the segment harmless as a whole (``;``), so the
        # session token in it was shown in every message that quoted the URL.
        ("https://mcp.example.com/app;jsessionid=1A2B3C4D5E6F7A8B/mcp", "1A2B3C4D5E6F7A8B"),
        ("https://mcp.example.com/mcp;JSESSIONID=node0abcdef.node0", "node0abcdef.node0"),
        ("https://mcp.example.com/mcp;v=2;sid=plainword", "plainword"),  # named so: any shape
        ("https://mcp.example.com/mcp?mode=fast;jsessionid=abcdefgh", "abcdefgh"),
        ("https://mcp.example.com/mcp?PHPSESSID=lettersonly", "lettersonly"),
        ("https://mcp.example.com/mcp#state=x1&access_token=fragmentword", "fragmentword"),
        ("https://mcp.example.com/(S(lit3py55t21z5v55vlm25s55))/mcp", "lit3py55t21z5v55vlm25s55"),
        ("https://mcp.example.com/(S(sessionword)F(ticketword))/mcp", "ticketword"),
        # Other spellings of the same parameters: percent-encoded separators, a value of a query
        # parameter holding them, fullwidth separators, no scheme, a backslash for the slashes.
        ("https://mcp.example.com/app%3Bjsessionid%3Dencodedword/mcp", "encodedword"),
        ("https://mcp.example.com/mcp?next=%2Fapp%3Bsid%3Dnestedword", "nestedword"),
        ("https://mcp.example.com/app\uff1bjsessionid\uff1dwideword/mcp", "wideword"),
        ("mcp.example.com/app;jsessionid=noschemeword", "noschemeword"),
        ("mcp.example.com/app%3Bjsessionid%3Dnoschemeencoded", "noschemeencoded"),
        ("mcp.example.com/app%253Bsid%253Dnoschemetwice", "noschemetwice"),
        ("https:\\\\mcp.example.com/app;token=backslashword", "backslashword"),
        ("https://mcp.example.com/app%253Bjsessionid%253Dtwiceword/mcp", "twiceword"),
        ("https://mcp.example.com/app;JSESSIONID\uff1dwideequalsword/mcp", "wideequalsword"),
    ],
)
def test_session_tokens_in_url_path_parameters_fragments_and_cookieless_paths_are_masked(
    url: str, secret: str
) -> None:
    found = configured_secrets(_http(url))
    assert {secret, url} <= found
    assert not {"mcp", "fast", "app", "mcp.example.com"} & found
    shown = Redactor(found).text(f"POST {url} failed: 502; retry {secret}")
    assert secret not in shown
    assert shown.count(MASK) >= 2


def test_a_path_without_parameters_keeps_its_harmless_segments() -> None:
    url = "https://mcp.example.com/v1;charset=utf-8/mcp#section-two"
    assert configured_secrets(_http(url)) == set()


def test_an_upstreams_url_in_error_messages_drops_path_parameters_query_and_fragment() -> None:
    from bridge_core.proxy._connection import _safe_url

    shown = _safe_url("https://u:pw@mcp.example.com:8443/app;jsessionid=tok/mcp;x=1?k=v#f")
    assert shown == "https://mcp.example.com:8443/app/mcp"
    # Encoded separators, a cookieless ticket, a password holding "@"; a port that is no
    # number or a broken IPv6 address is described, not a second error.
    assert _safe_url("https://mcp.example.com/a%253Bsid%253Dtok/(S(tok))/mcp") == (
        "https://mcp.example.com/a/(…)/mcp"
    )
    assert _safe_url("https://u:p@w@mcp.example.com/mcp") == "https://mcp.example.com/mcp"
    assert _safe_url("https://mcp.example.com:99999/mcp") == "https://mcp.example.com:99999/mcp"
    # A password holding an unencoded ? / or # ends the netloc early: no part of it is shown.
    for leaky in (
        "https://svc:Zk3?9qLmxT0k@api.example.com/mcp",
        "https://svc:Zk3/9qLmxT0k@api.example.com/mcp",
        "https://svc:Zk3#9qLmxT0k@api.example.com/mcp",
    ):
        assert "Zk3" not in _safe_url(leaky), leaky
        assert _safe_url(leaky).startswith("https://(…)")
    assert _safe_url("https://[::1]:8080/mcp") == "https://[::1]:8080/mcp"
    assert _safe_url("https://[::1/mcp") == "(a URL that does not parse)"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_PERSONAL_ACCESS_TOKEN", True),
        ("Authorization", True),
        ("--api-key", True),
        ("X-Auth-PW", True),
        ("DB_PASSWORD", True),
        ("--local-timezone", False),
        ("NODE_ENV", False),
    ],
)
def test_names_that_say_secret(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_every_occurrence_is_masked_and_a_secret_holding_another_keeps_its_harmless_rest() -> None:
    redactor = Redactor(["pw1234567", "user:pw1234567", "postgresql://user:pw1234567@db/app"])
    assert redactor.secrets == ("pw1234567",)
    text = "postgresql://user:pw1234567@db/app failed; password pw1234567"
    assert redactor.text(text) == f"postgresql://user:{MASK}@db/app failed; password {MASK}"


def test_the_end_of_a_secret_at_a_front_cut_is_masked_but_not_two_shared_letters() -> None:
    redactor = Redactor(["token-0123456789abcdef"])
    assert redactor.text("89abcdef and more", cut_front=True) == f"{MASK} and more"
    assert redactor.text("ef is fine", cut_front=True) == "ef is fine"
    assert redactor.text("89abcdef not cut") == "89abcdef not cut"
    assert redactor.text("cut here token-01", cut_back=True) == f"cut here {MASK}"


def test_json_values_are_masked_in_strings_and_keys_and_left_alone_without_secrets() -> None:
    redactor = Redactor(["sk-live-123456"])
    value = {"content": [{"text": "key sk-live-123456"}], "sk-live-123456": 1, "n": 2}
    assert redactor.value(value) == {"content": [{"text": f"key {MASK}"}], MASK: 1, "n": 2}
    assert Redactor().value(value) is value


def test_json_nested_past_the_walk_is_masked_whole_when_it_holds_a_secret() -> None:
    redactor = Redactor(["sk-live-123456"])
    deep: object = "key sk-live-123456"
    harmless: object = "nothing"
    for _ in range(100):
        deep, harmless = {"k": deep}, {"k": harmless}
    assert "sk-live-123456" not in json.dumps(redactor.value({"a": deep}))
    assert redactor.value({"a": harmless}) == {"a": harmless}


def test_short_values_are_never_secrets() -> None:
    assert Redactor(["abc", "12345"]).secrets == ()


def test_a_script_argument_is_judged_word_by_word_without_quotes() -> None:
    script = "curl -H 'Authorization: token ghp_abcdef123456' \"$API\" | jq '.[] | f(x)'"
    found = configured_secrets(_stdio("-c", script))
    assert "ghp_abcdef123456" in found
    assert not {"$API", "f(x)", "curl"} & found


def test_a_raw_entry_in_any_clients_dialect_yields_the_secrets_its_spec_would() -> None:
    token, key, bearer = "c2VjcmV0LXRva2VuLTEyMw", "sk-live-4f9a8b7c6d5e", "eyJhbGciOiJIUzI1NiJ9x"
    windsurf = {"serverUrl": f"https://mcp.example.com/mcp?token={token}"}
    codex = {"command": "srv", "args": ["--api-key", key], "http_headers": {"X-Api": bearer}}
    gemini = {
        "httpUrl": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer " + bearer},
    }
    assert token in entry_secrets(windsurf)
    assert entry_secrets(codex) >= {key, bearer}
    assert bearer in entry_secrets(gemini)
    assert entry_secrets(codex) >= configured_secrets(_stdio("--api-key", key))
    assert (
        entry_secrets({"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}) == set()
    )
