"""The bridge's stdio server (``serve_stdio``) with a scripted executor, run as a process by the
stdio tests: ``python scripted_server.py``. The executor plays what the code names:

- ``block``: waits until cancelled; ``cancelled?``: how many executions were cancelled so far;
- ``progress``: two stdout lines, then the code's own progress;
- ``roots``: asks the client for its roots (a request to the client during the call);
- ``can ask?``: whether the call's channel can carry a request to the client;
- ``boom`` / ``refused``: the executor raises RuntimeError / ValueError;
- ``print:TEXT``: TEXT as stdout;
- anything else: the code's repr as the value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from bridge_core.sessions.types import ExecutionListener, ExecutionResult
from mcp_code_execution_mode.serve import serve_stdio
from mcp_code_execution_mode.server import Executor
from mcp_code_execution_mode.settings import Settings


class ScriptedExecutor:
    def __init__(self) -> None:
        self.cancelled = 0

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
        name = session or "default"
        if code == "block":
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
        if code == "cancelled?":
            return ExecutionResult(status="ok", session=name, value=repr(self.cancelled))
        if code == "progress":
            assert listener is not None
            await listener.on_output("stdout", "first line\nsecond ")
            await listener.on_output("stdout", "line\n")
            await listener.on_progress(5, 10, "half way")
            return ExecutionResult(status="ok", session=name, stdout="first line\nsecond line\n")
        if code == "roots":
            link: Any = getattr(listener, "client", None)
            roots = await link.list_roots()
            uris = [str(root.uri) for root in roots.roots]
            return ExecutionResult(status="ok", session=name, value=repr(uris))
        if code == "can ask?":
            link = getattr(listener, "client", None)
            return ExecutionResult(status="ok", session=name, value=repr(link.supports("roots")))
        if code == "boom":
            raise RuntimeError("boom")
        if code == "refused":
            raise ValueError("the session 'x' is refused")
        if code.startswith("print:"):
            return ExecutionResult(status="ok", session=name, stdout=code.removeprefix("print:"))
        return ExecutionResult(status="ok", session=name, value=repr(code), duration=0.25)

    def holds_sessions(self, client: str | None) -> bool:
        return False

    async def close_client(self, client: str | None) -> list[str]:
        return []


@asynccontextmanager
async def open_executor() -> AsyncIterator[Executor]:
    yield ScriptedExecutor()


def main() -> None:
    anyio.run(serve_stdio, Settings(max_timeout=600), open_executor)


if __name__ == "__main__":
    main()
