"""The executor opened in the background, so that the server answers ``initialize`` first.

Opening the bridge (discovery, the state dir, the upstream pool, the session manager) needs most
of bridge-core, podman-py, the protocol and the search index: measured ~0.35 s of imports on a
2-core machine, more under load. The SDK enters a server's lifespan before it reads the first
message, so whatever the lifespan awaits delays ``initialize``. Here the lifespan only starts a
task that imports those modules in a worker thread (the event loop keeps answering meanwhile) and
then enters the real executor; a call waits until it is open. A failure to open becomes the
answer of every call, where the user reads it (a server that exits at start shows in the client
only as "Connection closed").
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from bridge_core.errors import BridgeError

from mcp_code_execution_mode.server import Executor, ExecutorFactory

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult

__all__ = ["BackgroundExecutor", "background_factory"]

logger = logging.getLogger(__name__)


class BridgeUnavailable(BridgeError):
    """The bridge could not be opened (the message says why); every call answers it."""


class BackgroundExecutor:
    """An :class:`Executor` that forwards to the real one once :meth:`open` has entered it."""

    def __init__(self) -> None:
        self._opened = anyio.Event()
        self._executor: Executor | None = None
        self._failure: str | None = None

    async def open(self, load: Callable[[], ExecutorFactory]) -> None:
        """Import with ``load`` in a worker thread, enter its factory and hold it until
        cancelled (the lifespan's end), which closes it."""
        try:
            # abandon_on_cancel: a client that leaves at once does not wait for the imports.
            factory = await anyio.to_thread.run_sync(load, abandon_on_cancel=True)
            async with factory() as executor:
                self._executor = executor
                self._opened.set()
                await anyio.sleep_forever()
        except BridgeError as exc:  # e.g. ConfigError: the message names the setting
            self._failure = str(exc)
            logger.error("the bridge could not start: %s", exc)
        except Exception as exc:  # top-level handler of this task: every call reports it
            self._failure = f"the bridge could not start ({type(exc).__name__}: {exc})"
            logger.exception("the bridge could not start")
        finally:
            self._executor = None
            if self._failure is None:
                self._failure = "the bridge is shutting down"
            self._opened.set()

    async def wait_open(self) -> None:
        if not self._opened.is_set():  # waiting on a set event still yields a loop turn
            await self._opened.wait()

    async def _executor_now(self) -> Executor:
        await self.wait_open()
        if self._executor is None:
            raise BridgeUnavailable(self._failure or "the bridge is not open")
        return self._executor

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
        executor = await self._executor_now()
        return await executor.execute(
            code, session=session, timeout=timeout, reset=reset, listener=listener, client=client
        )

    @property
    def gateway(self) -> Any:
        """The open bridge's gateway (direct tools), None until it is open or when it failed."""
        return getattr(self._executor, "gateway", None)

    def holds_sessions(self, client: str | None) -> bool:
        return self._executor is not None and self._executor.holds_sessions(client)

    async def close_client(self, client: str | None) -> list[str]:
        if self._executor is None:
            return []
        return await self._executor.close_client(client)


def background_factory(load: Callable[[], ExecutorFactory]) -> ExecutorFactory:
    """A factory whose executor is usable at once and opens ``load()``'s in the background."""

    @asynccontextmanager
    async def open_executor() -> AsyncIterator[Executor]:
        executor = BackgroundExecutor()
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.open, load)
            yield executor
            tg.cancel_scope.cancel()

    return open_executor
