"""The upstream pool over streamable HTTP and SSE, against the Node ``server-everything``."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import pytest
from bridge_core.proxy import ProxyOptions, UpstreamPool, UpstreamUnavailable
from bridge_core.servers import ServerSpec

_READY_MARKERS = (b"listening on port", b"running on port")

HttpServer = Callable[[str, int], AbstractAsyncContextManager[None]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def http_server(third_party: dict[str, str]) -> HttpServer:
    """``async with http_server(mode, port):`` runs server-everything in that mode until exit."""

    @asynccontextmanager
    async def run(mode: str, port: int) -> AsyncIterator[None]:
        env = {**os.environ, "PORT": str(port)}
        command = [third_party["MCP_SERVER_EVERYTHING"], mode]
        async with await anyio.open_process(command, env=env, stdout=subprocess.DEVNULL) as proc:
            try:
                assert proc.stderr is not None
                seen = b""
                with anyio.fail_after(30):
                    async for chunk in proc.stderr:
                        seen += chunk
                        if any(marker in seen for marker in _READY_MARKERS):
                            break
                yield
            finally:
                proc.kill()
                with anyio.CancelScope(shield=True):
                    await proc.wait()

    return run


def _text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


@pytest.mark.parametrize(
    ("mode", "transport", "path"), [("streamableHttp", "http", "/mcp"), ("sse", "sse", "/sse")]
)
async def test_http_server_answers_calls_in_parallel(
    http_server: HttpServer, mode: str, transport: str, path: str
) -> None:
    port = _free_port()
    spec = ServerSpec(
        name="remote",
        transport=transport,  # type: ignore[arg-type]
        url=f"http://127.0.0.1:{port}{path}",
        headers={"X-Bridge-Test": "1"},
    )
    results: list[str] = []
    async with http_server(mode, port), UpstreamPool([spec]) as pool:
        assert "echo" in [tool.name for tool in await pool.list_tools("remote")]

        async def echo(i: int) -> None:
            results.append(_text(await pool.call_tool("remote", "echo", {"message": f"m{i}"})))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(echo, i)
    assert sorted(results) == sorted(f"Echo: m{i}" for i in range(10))


async def test_http_server_that_goes_away_fails_clearly_and_is_reconnected_when_back(
    http_server: HttpServer,
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    spec = ServerSpec(name="remote", transport="http", url=url)
    async with UpstreamPool([spec], ProxyOptions(backoff_initial=0.0, start_timeout=10)) as pool:
        async with http_server("streamableHttp", port):
            assert _text(await pool.call_tool("remote", "echo", {"message": "a"})) == "Echo: a"
        with pytest.raises(UpstreamUnavailable) as caught:
            await pool.call_tool("remote", "echo", {"message": "b"})
        assert url in str(caught.value)
        async with http_server("streamableHttp", port):
            result = await pool.call_tool("remote", "echo", {"message": "c"})
            assert _text(result) == "Echo: c"
