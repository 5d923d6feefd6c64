"""The server a client gets when the bridge cannot be configured: it starts anyway.

An MCP client shows a server that exits at start as "Connection closed", with the reason only in
a log file few users find. So a bad setting (or bad command-line arguments) still gives a working
MCP server: ``tools/list`` lists ``run_python`` as always, and every call answers ``isError`` with
the problem and its fix, where the user (and the model) read it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bridge_core.errors import ConfigError
from bridge_core.sessions.types import ExecutionListener, ExecutionResult

from mcp_code_execution_mode.server import Executor, ExecutorFactory

__all__ = ["misconfigured_factory", "problem_text"]

logger = logging.getLogger(__name__)


def problem_text(problem: str, fix: str) -> str:
    """What every ``run_python`` call answers."""
    return (
        f"the code-execution bridge is not configured correctly, so it cannot run code: "
        f"{problem}. Fix: {fix}. `mcp-code-execution-mode doctor` checks the configuration."
    )


class _Refusing:
    def __init__(self, message: str) -> None:
        self._message = message

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the Executor protocol
        reset: bool = False,
        listener: ExecutionListener | None = None,
        client: str | None = None,
    ) -> ExecutionResult:
        raise ConfigError(self._message)

    def holds_sessions(self, client: str | None) -> bool:
        return False  # it never opens one

    async def close_client(self, client: str | None) -> list[str]:
        return []


def misconfigured_factory(problem: str, fix: str) -> ExecutorFactory:
    """An executor factory whose executor answers every call with ``problem`` and ``fix``."""
    message = problem_text(problem, fix)

    @asynccontextmanager
    async def open_executor() -> AsyncIterator[Executor]:
        logger.error("%s", message)
        yield _Refusing(message)

    return open_executor
