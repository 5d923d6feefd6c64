"""Run the server over stdio (the default) or streamable HTTP, until the client leaves or a
signal arrives; either way the lifespan unwinds, so sandboxes and upstream servers are stopped.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from typing import cast

import anyio
from mcp.server.stdio import stdio_server

from mcp_code_execution_mode._malformed import AnswerMalformed
from mcp_code_execution_mode._stdin import interruptible_stdin
from mcp_code_execution_mode.server import ExecutorFactory, create_server
from mcp_code_execution_mode.settings import Settings

__all__ = ["parse_http_address", "serve_http", "serve_stdio"]

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
    """Serve one client over stdin/stdout."""
    server = create_server(settings, executor_factory)

    async def main() -> None:
        async with (
            interruptible_stdin() as lines,
            stdio_server(stdin=cast("anyio.AsyncFile[str] | None", lines)) as (read, write),
        ):
            answered = AnswerMalformed(read, write)
            await server.run(answered, write, server.create_initialization_options())

    await _until_signal(main)


def parse_http_address(raw: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6) → (host, port); raises ValueError."""
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


async def serve_http(
    settings: Settings, executor_factory: ExecutorFactory, host: str, port: int
) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` for any number of clients.

    One executor is shared by all of them (the SDK's session manager enters the lifespan once).
    uvicorn handles SIGTERM/SIGINT itself with a graceful shutdown that exits that lifespan.
    """
    import uvicorn  # only the HTTP transport needs it

    server = create_server(settings, executor_factory)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="on")
    logger.info("serving streamable HTTP on http://%s:%d/mcp", host, port)
    await uvicorn.Server(config).serve()
