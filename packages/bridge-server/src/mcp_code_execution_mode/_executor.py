"""What the server's lifespan holds: the executor that runs code (and how it is opened), and the
state every request handler borrows from it (:class:`BridgeState`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mcp_code_execution_mode._run_registry import Runs
from mcp_code_execution_mode.settings import Settings

if TYPE_CHECKING:  # the protocol and the session types load with the executor, in the background
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult

__all__ = ["BridgeState", "Executor", "ExecutorFactory", "OpeningExecutor"]


class Executor(Protocol):
    """Runs code in sessions: :class:`bridge_core.sessions.SessionManager` is the real one."""

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the session manager's contract
        reset: bool = False,
        listener: ExecutionListener | None = None,
        client: str | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in ``client``'s session; sandbox failures are results, invalid arguments
        raise ValueError."""
        ...

    def holds_sessions(self, client: str | None) -> bool:
        """Whether ``client`` has sessions (state that would be lost with it)."""
        ...

    async def close_client(self, client: str | None) -> list[str]:
        """Stop every session of a client that is gone; return their names."""
        ...


class OpeningExecutor(Protocol):
    """An executor that opens after the server started answering (see ``_background``)."""

    async def wait_open(self) -> None:
        """Return once it is open or failed to open (its calls then say why)."""
        ...


ExecutorFactory = Callable[[], AbstractAsyncContextManager[Executor]]
"""Opens the executor (and everything it owns) for the server's whole lifetime."""


@dataclass(frozen=True, slots=True)
class BridgeState:
    """What the lifespan yields to every handler."""

    executor: Executor
    settings: Settings
    runs: Runs
