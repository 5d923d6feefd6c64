"""Fakes for in-process server tests: an executor that records calls and plays scripted results."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from bridge_core.sessions.types import ExecutionListener, ExecutionResult
from mcp_code_execution_mode.server import Executor

Script = Callable[[str, ExecutionListener | None], Awaitable[ExecutionResult]]


@dataclass
class FakeExecutor:
    """Stands in for the session manager where the sandbox is not what a test is about."""

    script: Script | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    clients: list[str | None] = field(default_factory=list)
    opened: int = 0
    closed: int = 0
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    started: anyio.Event = field(default_factory=anyio.Event)

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors the session manager
        reset: bool = False,
        listener: ExecutionListener | None = None,
        client: str | None = None,
    ) -> ExecutionResult:
        self.clients.append(client)
        self.calls.append({"code": code, "session": session, "timeout": timeout, "reset": reset})
        self.started.set()
        if self.script is not None:
            try:
                return await self.script(code, listener)
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
        return ExecutionResult(status="ok", session=session or "default", value=repr(code))

    def holds_sessions(self, client: str | None) -> bool:
        return client in self.clients

    async def close_client(self, client: str | None) -> list[str]:
        return []

    def factory(self) -> Callable[[], Any]:
        @asynccontextmanager
        async def open_executor() -> AsyncIterator[Executor]:
            self.opened += 1
            try:
                yield self
            finally:
                self.closed += 1

        return open_executor


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()
