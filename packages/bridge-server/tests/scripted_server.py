"""The bridge's stdio server with a scripted executor, run as a process by the fast-path tests.

    python fast_path_server.py fast|sdk

``fast``: as the bridge serves (the ``run_python`` fast path on); ``sdk``: every message through
the SDK's server loop (the reference). The executor plays what the code names:

- ``block``: waits until cancelled; ``cancelled?``: how many executions were cancelled so far;
- ``progress``: two stdout lines, then the code's own progress;
- ``roots``: asks the client for its roots (a request to the client during the call);
- ``boom`` / ``refused``: the executor raises RuntimeError / ValueError;
- ``print:TEXT``: TEXT as stdout; ``taken?``: the ids of the calls the fast path took;
- anything else: the code's repr as the value.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from bridge_core.sessions.types import ExecutionListener, ExecutionResult
from mcp_code_execution_mode import _fast_calls
from mcp_code_execution_mode.serve import serve_stdio
from mcp_code_execution_mode.server import Executor
from mcp_code_execution_mode.settings import Settings

taken: list[Any] = []
"""Ids of the requests the fast path took, in order."""
_take = _fast_calls.FastCalls.take


def _counted_take(self: _fast_calls.FastCalls, line: str) -> bool:
    took = _take(self, line)
    if took:
        taken.append(json.loads(line)["id"])
    return took


_fast_calls.FastCalls.take = _counted_take  # type: ignore[method-assign]  # counts, changes nothing


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
        if code == "taken?":
            return ExecutionResult(status="ok", session=name, value=repr(taken))
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
    fast = sys.argv[1] == "fast"
    anyio.run(lambda: serve_stdio(Settings(max_timeout=600), open_executor, fast_path=fast))


if __name__ == "__main__":
    main()
