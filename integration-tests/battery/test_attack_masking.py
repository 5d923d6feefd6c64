"""Attacks on the masking of session tokens carried in URLs, through the real bridge.

A session token in a URL's path parameters (``/app;jsessionid=<token>``) was masked as written;
the same parameter spelled otherwise (percent-encoded, inside a query value, behind fullwidth
separators, in a URL without a scheme) left the token in every text that quoted the URL. The
tokens here are plain lowercase words, which only the parameter's name says are secrets: the
shape of a random token would be masked on its own.
"""

from __future__ import annotations

import json
import secrets
import socket
import string
import sys
from ast import literal_eval
from pathlib import Path

import mcp_types as types
import pytest

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"


def _word() -> str:
    """A session token shaped like a plain word (no digits, no case changes)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(18))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


ECHO_BACK = """
from mcp import mcp_servers, ToolError
report = {"argv": (await mcp_servers["echoes"].env())["argv"]}
try:
    await mcp_servers["remote"].echo(text="x")
except ToolError as exc:
    report["remote"] = [type(exc).__name__, str(exc)]
report
"""


async def test_session_tokens_in_other_spellings_of_url_path_parameters_are_masked(
    tmp_path: Path, sandbox_image: str
) -> None:
    w = {kind: _word() for kind in ("encoded", "nested", "wide", "bare", "remote")}
    args = [
        f"https://app.example.com/shop%3Bjsessionid%3D{w['encoded']}/cart",
        f"https://app.example.com/login?next=%2Fshop%3Bsid%3D{w['nested']}",
        f"https://app.example.com/shop\uff1bjsessionid\uff1d{w['wide']}",
        f"app.example.com/shop;jsessionid={w['bare']}",
    ]
    servers = {
        "echoes": {"command": sys.executable, "args": [str(PROBE), *args]},
        "remote": {
            "type": "http",
            "url": f"http://127.0.0.1:{_closed_port()}/shop%3Bjsessionid%3D{w['remote']}/mcp",
        },
    }
    log = tmp_path / "bridge.log"
    env = {"MCP_BRIDGE_LOG_FILE": str(log), "MCP_BRIDGE_LOG_LEVEL": "debug"}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        result = await bridge.run(ECHO_BACK, timeout=110)
    assert isinstance(result, types.CallToolResult)
    seen = json.dumps(result.model_dump(by_alias=True, mode="json"), ensure_ascii=False)
    logged = log.read_text()
    for kind, word in w.items():
        assert word not in seen, kind
        assert word not in logged, kind
    report = literal_eval(code_text(result))
    # The rest of each URL stays readable: only the token is masked.
    assert [arg.count("***") for arg in report["argv"][1:]] == [1, 1, 1, 1], report["argv"]
    assert report["argv"][1].startswith("https://app.example.com/shop")
    kind, message = report["remote"]
    assert kind == "UpstreamUnavailable", message
    assert "127.0.0.1" in message
