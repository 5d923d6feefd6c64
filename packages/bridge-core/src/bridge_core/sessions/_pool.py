"""The warm pool: sandboxes started ahead of demand, and every on-demand start.

All starts run as tasks of the manager's task group, never in the caller's task: a caller that is
cancelled while its sandbox starts simply stops waiting, and the sandbox goes to the next waiter,
into the pool, or is stopped. Waiters are served first come, first served.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from bridge_core.errors import BridgeError, SandboxStartError
from bridge_core.sessions._sandbox import LiveSandbox

__all__ = ["SandboxPool"]

logger = logging.getLogger("bridge_core.sessions")

RETRY_FIRST = 1.0
RETRY_MAX = 60.0
"""Back-off between failed background refills, so a missing runtime is not retried in a loop."""


@dataclass(slots=True, eq=False)
class _Waiter:
    event: anyio.Event
    sandbox: LiveSandbox | None = None
    error: BridgeError | None = None
    gone: bool = False
    """Its caller stopped waiting (a sandbox started for it alone is then stopped)."""


Preimport = tuple[str, ...]
"""Modules a sandbox imports as it starts (see ``SandboxSpec.preimport``)."""


class SandboxPool:
    """Hands out connected sandboxes; keeps ``target`` of them ready in the background."""

    def __init__(
        self,
        target: int,
        *,
        start: Callable[[Preimport], Awaitable[LiveSandbox]],
        discard: Callable[[LiveSandbox], None],
        task_group: TaskGroup,
    ) -> None:
        self.target = target
        self._start = start
        self._discard = discard
        self._tg = task_group
        self._ready: deque[LiveSandbox] = deque()
        self._waiters: deque[_Waiter] = deque()
        self._starting = 0
        self._wake = anyio.Event()
        self._stocked = anyio.Event()
        self.hits = 0
        """Takes served by an already running sandbox."""
        self.misses = 0
        """Takes that had to wait for a start."""
        self.closed = False
        self.preimport: Preimport = ()
        """What the pool's own sandboxes import as they start: set by a one-client bridge from
        its saved sessions' hints (see docs/decisions.md); () otherwise."""

    @property
    def ready(self) -> int:
        return sum(1 for live in self._ready if live.alive)

    async def wait_ready(self) -> None:
        """Return once ``target`` live sandboxes are ready (at once if the target is 0)."""
        while self.ready < self.target and not self.closed:
            await self._stocked.wait()

    def fill(self) -> None:
        """Start sandboxes until ``target`` are ready or starting (plus one per waiter)."""
        if self.closed:
            return
        needed = len(self._waiters) + self.target - len(self._ready) - self._starting
        for _ in range(max(0, needed)):
            self._starting += 1
            self._tg.start_soon(self._start_one)

    async def take(self, preimport: Preimport = ()) -> LiveSandbox:
        """A connected sandbox: a warm one if any, else one started now; with ``preimport``
        (the modules a session's saved state needs) that the pool's own sandboxes do not
        import, one started for this caller alone, which imports them as it starts, and goes to
        no one else.

        Raises the start's :class:`~bridge_core.errors.BridgeError` (e.g. RuntimeUnavailable).
        """
        while self._ready:
            live = self._ready.popleft()
            if live.alive:
                self.hits += 1
                self.fill()
                return live
            logger.info("warm sandbox %s died while idle: %s", live.name, live.failure_reason)
            self._discard(live)
        self.misses += 1
        # A pool sandbox imports self.preimport as it starts: when that covers what this caller
        # needs, the pool's start under way (begun when the bridge opened) serves it sooner than
        # a start of its own begun now.
        if preimport and not self.closed and not set(preimport) <= set(self.preimport):
            return await self._take_own(preimport)
        waiter = _Waiter(anyio.Event())
        self._waiters.append(waiter)
        # A caller is waiting: a background start sleeping off a failure retries now.
        self._wake.set()
        self._wake = anyio.Event()
        self.fill()
        try:
            await waiter.event.wait()
        except BaseException:
            # Cancelled while waiting: leave the queue, and pass on a sandbox delivered meanwhile.
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.sandbox is not None:
                self._deliver(waiter.sandbox)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.sandbox is not None
        return waiter.sandbox

    async def _take_own(self, preimport: Preimport) -> LiveSandbox:
        waiter = _Waiter(anyio.Event())
        self._tg.start_soon(self._start_own, waiter, preimport)
        try:
            await waiter.event.wait()
        except BaseException:
            waiter.gone = True
            if waiter.sandbox is not None:
                self._discard(waiter.sandbox)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.sandbox is not None
        return waiter.sandbox

    async def _start_own(self, waiter: _Waiter, preimport: Preimport) -> None:
        try:
            live = await self._start(preimport)
        except BridgeError as exc:
            waiter.error = exc
        else:
            if waiter.gone or self.closed:
                self._discard(live)  # its imports came from that session's state: never pooled
                waiter.error = SandboxStartError("the bridge is shutting down")
            else:
                waiter.sandbox = live
        waiter.event.set()

    async def _start_one(self) -> None:
        delay = RETRY_FIRST
        while True:
            try:
                live = await self._start(self.preimport)
            except BridgeError as exc:
                if self._waiters:
                    self._starting -= 1
                    waiter = self._waiters.popleft()
                    waiter.error = exc
                    waiter.event.set()
                    return
                if self.closed or len(self._ready) + self._starting > self.target:
                    self._starting -= 1
                    return
                logger.warning("warm pool: sandbox start failed (retrying in %gs): %s", delay, exc)
                with anyio.move_on_after(delay):
                    await self._wake.wait()
                delay = min(delay * 2, RETRY_MAX)
                continue
            self._starting -= 1
            self._deliver(live)
            return

    def _deliver(self, live: LiveSandbox) -> None:
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.sandbox = live
            waiter.event.set()
            return
        if not self.closed and len(self._ready) < self.target and live.alive:
            self._ready.append(live)
            self._stocked.set()
            self._stocked = anyio.Event()
        else:
            self._discard(live)

    def drain(self) -> list[LiveSandbox]:
        """Close the pool: no more starts; return the ready sandboxes for stopping."""
        self.closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.error = SandboxStartError("the bridge is shutting down")
            waiter.event.set()
        ready = list(self._ready)
        self._ready.clear()
        return ready
