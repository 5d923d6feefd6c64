"""A call or request in flight: a :class:`concurrent.futures.Future`, loaded by the first call.

:mod:`concurrent.futures` imports :mod:`logging` (~0.9 MiB of a sandbox's memory), so it is
imported by :meth:`CallRegistry._start <._calls.CallRegistry._start>` as code makes its first
call, never at start: a sandbox whose code calls no tool never holds it. Everything that
touches a future's states goes through the methods here, so no other module names it.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from bridge_sandbox_client.errors import ToolCancelled

__all__ = ["PendingCall"]


class PendingCall(concurrent.futures.Future[Any]):
    """A call or request in flight; knows its target for error messages."""

    def __init__(self, server: str | None, tool: str | None) -> None:
        super().__init__()
        self.server = server
        self.tool = tool

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        """Complete with ``error`` if given, else with ``value``; nothing if its caller has
        cancelled it meanwhile (from another thread)."""
        try:
            if error is not None:
                self.set_exception(error)
            else:
                self.set_result(value)
        except concurrent.futures.InvalidStateError:
            pass

    def wait_sync(self) -> Any:
        """Block until complete; an interrupt (KeyboardInterrupt) abandons the call."""
        try:
            return self.result()
        except concurrent.futures.CancelledError:
            raise ToolCancelled(
                "the call was cancelled", server=self.server, tool=self.tool
            ) from None
        except BaseException:
            self.cancel()
            raise
