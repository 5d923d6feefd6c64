"""Run the server over stdio (the default) or streamable HTTP, until the client leaves or a
signal arrives; either way the lifespan unwinds, so sandboxes and upstream servers are stopped.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.middleware import Middleware

from mcp_code_execution_mode._clients import RefuseAnonymousStateless
from mcp_code_execution_mode._malformed import AnswerMalformed
from mcp_code_execution_mode._stdio import stdio_transport
from mcp_code_execution_mode.server import Executor, ExecutorFactory, create_server
from mcp_code_execution_mode.settings import Settings

__all__ = [
    "MCP_PATH",
    "check_http_exposure",
    "endpoint_url",
    "open_listener",
    "parse_http_address",
    "serve_http",
    "serve_stdio",
    "transport_security",
]

logger = logging.getLogger(__name__)


async def _until_signal(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main``; SIGTERM/SIGINT/SIGHUP cancel it so the lifespan's cleanup runs (a plain
    SIGTERM would otherwise end the process with the sandbox containers still running)."""
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as sigs:
                async for signum in sigs:
                    logger.info("received %s: shutting down", signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch_signals)
        await main()
        tg.cancel_scope.cancel()


async def serve_stdio(settings: Settings, executor_factory: ExecutorFactory) -> None:
    """Serve one client over stdin/stdout with the SDK's own server loop (``Server.run``), as
    over HTTP: the bridge adds only its transport (:mod:`._stdio`: bounded, cancellable reads)
    and the JSON-RPC errors for undecodable lines (:mod:`._malformed`)."""
    server = create_server(settings, executor_factory)
    options = server.create_initialization_options()  # tools.listChanged: see server._BridgeServer

    async def main() -> None:
        async with stdio_transport() as streams:
            if streams is not None:
                read, write = streams
                await server.run(AnswerMalformed(read, write), write, options)
                return
        async with stdio_server() as (sdk_read, sdk_write):  # stdin cannot be polled
            await server.run(AnswerMalformed(sdk_read, sdk_write), sdk_write, options)

    await _until_signal(main)


def parse_http_address(raw: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6; port 0 picks a free one) → (host, port); raises
    ValueError."""
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


async def serve_http(
    settings: Settings, executor_factory: ExecutorFactory, host: str, listener: socket.socket
) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` on ``listener`` (see
    :func:`open_listener`; ``host`` as the user gave it) for any number of clients.

    One executor is shared by all of them (the SDK's session manager enters the lifespan once);
    each client sees only its own sessions (``_clients``), and the MCP sessions are bounded per
    client (``_http_sessions``). With ``http_token_file`` every request needs a bearer token.
    The URL is printed on stdout once the bridge is ready. uvicorn handles SIGTERM/SIGINT itself
    with a graceful shutdown that exits the lifespan.
    """
    import uvicorn  # only the HTTP transport needs these

    from mcp_code_execution_mode._http_sessions import McpSessionGate
    from mcp_code_execution_mode._tokens import StaticTokenVerifier

    exposure = check_http_exposure(settings, host)  # raises ValueError naming the setting
    url = endpoint_url(host, listener.getsockname()[1])
    verifier = auth = None
    if settings.http_token_file is not None:
        verifier = StaticTokenVerifier(settings.http_token_file)
        # The bridge is the issuer of its static tokens; without a resource_server_url no OAuth
        # metadata is published (there is no authorization server to send clients to).
        auth = AuthSettings(issuer_url=AnyHttpUrl(url), resource_server_url=None)
    gate = McpSessionGate(
        path=MCP_PATH,
        per_client=settings.http_connections_per_client,
        anonymous_ttl=settings.http_anonymous_ttl,
        idle_ttl=settings.session_ttl,
        requires_auth=verifier is not None,
    )

    @asynccontextmanager
    async def open_executor() -> AsyncIterator[Executor]:
        async with executor_factory() as executor, gate.serving(executor):
            logger.info("serving MCP at %s (%s)", url, exposure)
            print(f"serving MCP at {url}", flush=True)  # stdout is not the protocol over HTTP
            yield executor

    server = create_server(settings, open_executor)
    server.middleware.insert(0, RefuseAnonymousStateless())
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=transport_security(host, settings.http_allowed_hosts),
        auth=auth,
        token_verifier=verifier,
        session_idle_timeout=settings.session_ttl,
    )
    # Innermost of the app's middleware: behind authentication (scope["user"] is known), in front
    # of the SDK's session manager.
    app.user_middleware.append(Middleware(gate.middleware))
    config = uvicorn.Config(app, log_config=None, lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


MCP_PATH = "/mcp"
LISTEN_BACKLOG = 2048
"""uvicorn's default: connections that wait while the bridge is busy."""
_LOOPBACK_NAMES = ("localhost",)
_WILDCARDS = ("0.0.0.0", "::")


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may resolve to anything


def check_http_exposure(settings: Settings, host: str) -> str:
    """Refuse an HTTP bind that would let anybody in; return how clients are admitted.

    Raises ValueError naming the setting: a non-loopback address needs ``http_token_file``, a
    wildcard address needs the names clients use (``http_allowed_hosts``), and the token file
    must be safe and hold a token.
    """
    if settings.http_token_file is None:
        if not _is_loopback(host):
            raise ValueError(
                f"--http {host}: listening beyond loopback needs authentication; set "
                "MCP_BRIDGE_HTTP_TOKEN_FILE (--http-token-file) to a token file (add tokens with "
                "`mcp-code-execution-mode token NAME`), or listen on 127.0.0.1"
            )
        return "loopback, no authentication: each MCP session owns its sessions"
    from mcp_code_execution_mode._tokens import read_tokens  # HTTP only

    read_tokens(settings.http_token_file)  # raises TokenFileError (a ValueError) naming the fix
    if host in _WILDCARDS and not settings.http_allowed_hosts:
        raise ValueError(
            f"--http {host}: a bridge listening on every address needs the host names clients "
            "use to reach it (the Host header is checked against DNS rebinding): set "
            "MCP_BRIDGE_HTTP_ALLOWED_HOSTS, e.g. bridge.example.com"
        )
    return "bearer tokens required: each principal owns its sessions"


def transport_security(host: str, allowed: tuple[str, ...]) -> TransportSecuritySettings:
    """DNS-rebinding protection, always on: loopback names, the bound host, and ``allowed``."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host not in _WILDCARDS:
        names.append(f"[{host}]" if ":" in host else host)
    names += [name for name in allowed if name not in names]
    hosts: list[str] = []
    origins: list[str] = []
    for name in names:
        has_port = name.rsplit("]", 1)[-1].count(":") == 1
        hosts += [name] if has_port else [name, f"{name}:*"]
        for scheme in ("http", "https"):
            origins += [f"{scheme}://{name}"] if has_port else [
                f"{scheme}://{name}", f"{scheme}://{name}:*"
            ]  # fmt: skip
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def open_listener(host: str, port: int) -> socket.socket:
    """Bind and listen before serving: the URL printed is then reachable, port 0 gets a free
    port, and a bad address fails before anything starts. Raises OSError."""
    # As asyncio's own create_server does: the address from getaddrinfo, and the socket made
    # with proto=IPPROTO_TCP — asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and without it every SSE response waits ~40 ms for a delayed ACK (measured: 50 ms per
    # initialize instead of 20).
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(LISTEN_BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


def endpoint_url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"
