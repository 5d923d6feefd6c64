"""What ``serve --http`` decides before serving: where it listens, which Host names it answers."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp_code_execution_mode._tokens import add_token
from mcp_code_execution_mode.serve import (
    check_http_exposure,
    endpoint_url,
    open_listener,
    parse_http_address,
    transport_security,
)
from mcp_code_execution_mode.settings import Settings


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token_file(host: str) -> None:
    assert "no authentication" in check_http_exposure(Settings(), host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "bridge.example.com"])
def test_any_other_address_without_a_token_file_is_refused_naming_the_setting(host: str) -> None:
    with pytest.raises(ValueError, match="MCP_BRIDGE_HTTP_TOKEN_FILE"):
        check_http_exposure(Settings(), host)


def test_with_a_token_file_any_address_is_allowed_wildcards_need_the_host_names(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    add_token(tokens, "alice")
    settings = Settings(http_token_file=tokens)
    assert "bearer tokens" in check_http_exposure(settings, "192.0.2.10")
    with pytest.raises(ValueError, match="MCP_BRIDGE_HTTP_ALLOWED_HOSTS"):
        check_http_exposure(settings, "0.0.0.0")
    named = Settings(http_token_file=tokens, http_allowed_hosts=("bridge.example.com",))
    assert "bearer tokens" in check_http_exposure(named, "0.0.0.0")


def test_an_unsafe_token_file_is_refused_before_serving(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    add_token(tokens, "alice")
    tokens.chmod(0o666)
    with pytest.raises(ValueError, match="chmod 600"):
        check_http_exposure(Settings(http_token_file=tokens), "127.0.0.1")


def _allowed(security: object, host: str, origin: str | None = None) -> bool:
    middleware = TransportSecurityMiddleware(security)  # type: ignore[arg-type]
    return middleware._validate_host(host) and middleware._validate_origin(origin)


def test_dns_rebinding_protection_admits_loopback_the_bound_host_and_the_named_ones() -> None:
    security = transport_security("192.0.2.10", ("bridge.example.com", "proxy.example.com:8443"))
    assert security.enable_dns_rebinding_protection
    for host in ("127.0.0.1:8765", "localhost:1", "[::1]:8765", "192.0.2.10:8765"):
        assert _allowed(security, host), host
    assert _allowed(security, "bridge.example.com", "https://bridge.example.com")
    assert _allowed(security, "bridge.example.com:8765", "http://bridge.example.com:8765")
    assert _allowed(security, "proxy.example.com:8443", "https://proxy.example.com:8443")
    assert not _allowed(security, "proxy.example.com:9999")
    assert not _allowed(security, "evil.example.com:8765")
    assert not _allowed(security, "127.0.0.1:8765", "http://evil.example.com")


def test_a_wildcard_bind_admits_only_loopback_and_the_named_hosts() -> None:
    security = transport_security("0.0.0.0", ("bridge.example.com",))
    assert _allowed(security, "bridge.example.com:8765")
    assert not _allowed(security, "0.0.0.0:8765")
    assert not _allowed(security, "192.0.2.10:8765")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_http_addresses_parse_and_port_zero_means_any(raw: str, expected: tuple[str, int]) -> None:
    assert parse_http_address(raw) == expected


@pytest.mark.parametrize("raw", ["nowhere", "127.0.0.1:", ":80", "127.0.0.1:65536", "h:x"])
def test_bad_http_addresses_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_http_address(raw)


def test_the_listener_is_tcp_so_responses_are_not_held_back_by_nagle() -> None:
    listener = open_listener("127.0.0.1", 0)
    with listener:
        # asyncio sets TCP_NODELAY on accepted sockets only when their proto is IPPROTO_TCP.
        assert listener.proto == socket.IPPROTO_TCP
        port = listener.getsockname()[1]
        assert endpoint_url("127.0.0.1", port) == f"http://127.0.0.1:{port}/mcp"
    assert endpoint_url("::1", 8) == "http://[::1]:8/mcp"
