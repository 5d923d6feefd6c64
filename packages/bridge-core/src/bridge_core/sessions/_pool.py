"""The warm pool: sandboxes started ahead of demand, and every on-demand start.

All starts run as tasks of the manager's task group, never in the caller's task: a caller that is
cancelled while its sandbox starts simply stops waiting, and the sandbox goes to the next waiter,
into the pool, or is stopped. Waiters are served first come, first served.

A caller that finds the pool empty right after another found a warm sandbox raises the target by
one for the burst (up to ``BURST_MAX``); ``BURST_QUIET`` seconds without a take end the burst.
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
BURST_MAX = 4
"""Most sandboxes a burst of new sessions adds to the pool's target, one per caller that found
it empty soon after another caller found a warm one. New sessions asked for back to back (a
team starting work, an agent fanning out) used to alternate: one took the warm sandbox, the
next waited for its one refill (bench/first_output.py on a 2-core machine: 41 of 100 back-to-back
new sessions served warm with a pool of one, 67 with a pool of four). Each idle sandbox holds
about 16 MiB (bench/density.py)."""
BURST_QUIET = 30.0
"""Seconds without a take after which a burst is over: the target falls back to the configured
one and the extra ready sandboxes are stopped."""


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
        self._extra = 0
        """Added to ``target`` by a burst of takes that found the pool empty (see BURST_MAX)."""
        self._last_take = 0.0
        self._last_hit: float | None = None
        self._calming = False
        self._wake = anyio.Event()
        self._stocked = anyio.Event()
        self.hits = 0
        """Takes served by an already running sandbox."""
        self.misses = 0
        """Takes that had to wait for a start."""
        self.closed = False
        self.preimport: Preimport = ()
        """What the pool's own sandboxes import as they start: set by a one-client bridge from
        its saved sessions' hints (see docs/decisions/0079); () otherwise."""

    @property
    def ready(self) -> int:
        return sum(1 for live in self._ready if live.alive)

    async def wait_ready(self) -> None:
        """Return once ``target`` live sandboxes are ready (at once if the target is 0)."""
        while self.ready < self.target and not self.closed:
            await self._stocked.wait()

    def fill(self) -> None:
        """Start sandboxes until ``target`` (plus a burst's extra) are ready or starting, plus
        one per waiter."""
        if self.closed:
            return
        needed = len(self._waiters) + self.target + self._extra - len(self._ready) - self._starting
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
        self._last_take = anyio.current_time()
        while self._ready:
            live = self._ready.popleft()
            if live.alive:
                self.hits += 1
                self._last_hit = self._last_take
                self.fill()
                return live
            logger.info("warm sandbox %s died while idle: %s", live.name, live.failure_reason)
            self._discard(live)
        self.misses += 1
        if (
            self.target
            and self._extra < BURST_MAX
            and not self.closed
            and self._last_hit is not None
            and self._last_take - self._last_hit < BURST_QUIET
        ):
            # Emptied by takes (a recent one found a warm sandbox, this one none): demand
            # outruns one refill per take; keep one more ready for a while. A miss with no hit
            # before it (the first calls, while the pool is still filling) is no burst.
            self._extra += 1
            if not self._calming:
                self._calming = True
                self._tg.start_soon(self._calm)
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

    async def _calm(self) -> None:
        """End a burst once no take came for BURST_QUIET seconds: back to ``target``."""
        try:
            while not self.closed:
                quiet_until = self._last_take + BURST_QUIET
                if anyio.current_time() < quiet_until:
                    await anyio.sleep_until(quiet_until)
                    continue
                self._extra = 0
                while len(self._ready) > self.target:
                    self._discard(self._ready.pop())
                return
        finally:
            self._calming = False

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
                if self.closed or len(self._ready) + self._starting > self.target + self._extra:
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
        if not self.closed and len(self._ready) < self.target + self._extra and live.alive:
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
