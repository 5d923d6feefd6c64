"""Ending many podman sandboxes at once, and removing what dead bridges left.

The podman backend's shutdown seam (:class:`Reaper`): it holds each started sandbox's init as a
pidfd (:mod:`._pidfd`), kills every sandbox at once through them (the API for the rest), and
waits, bounded, for podman to remove them; it also removes the containers of dead bridges.

Where the time goes, measured on a 2-core VM with podman 4.3.1 (containers of the sandbox image,
SIGKILLed at once): the kills take microseconds; what takes seconds is podman's own removal.
Each container that exits makes its conmon start one ``podman container cleanup --rm``
process (the container's exit command, set by podman for every container), and that process
alone costs ~25 ms of wall time and ~50 ms of CPU even when it finds nothing left to do (120
no-op cleanups in parallel: 3.5 s); all of them and the API service take podman's database
lock (bolt, retried every 50 ms) several times each. Removed in one process (``podman rm`` of
120 already cleaned-up containers) the removals themselves take 0.9 s. So podman removes about
15-25 containers a second here whatever asks it: 120 exits at once were gone in 5.6-8.7 s when
left to auto-removal, 6.6-7.5 s with the bridge's removals through the API beside them, 5.9 s
when killed at most 8 or 24 at a time (half the CPU: 300 exits at once cost 131 ms of podman
CPU each against 48 ms paced), 300 at once in 24.5 s. No batched call avoids the exit command:
``POST /libpod/containers/prune`` skips containers whose cleanup is under way (10 of 60), and
neither ``--rm`` nor an explicit removal stops conmon from starting the process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import anyio
import podman

from bridge_core.runtime import _pidfd
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._engine import CLEANUP_TIMEOUT
from bridge_core.runtime._hardening import ContainerRecord, select_leftovers

__all__ = [
    "API_KILLS_AT_ONCE",
    "NAMES_LOGGED",
    "REMOVAL_WAIT",
    "Reaper",
]

logger = logging.getLogger(__name__)

API_KILLS_AT_ONCE = 16
"""Concurrent kills (and removals) through the API: podman serves each in a goroutine, and more
at once only queue on its locks."""
REMOVAL_WAIT = 2.0
"""Bound on :meth:`Reaper.kill_all` waiting for podman to remove the killed sandboxes: MCP
clients SIGKILL a server 4 s after closing its stdin (the SDK: 2 s, SIGTERM, 2 s), and the rest
of the shutdown took up to 0.9 s with 120 sessions on a loaded 2-core VM (3 s here: the bridge
exited 4.01 s after stdin closed, at the SIGKILL)."""
NAMES_LOGGED = 8


class Reaper:
    """Kills and removals of one backend's sandboxes: the init pidfds it holds, the sandboxes
    killed whose removal nobody waited for yet, and leftovers of dead bridges."""

    def __init__(self, client: podman.PodmanClient) -> None:
        self._client = client
        self.inits: dict[str, _pidfd.HeldInit] = {}
        """Init processes of started sandboxes, by container name (:meth:`hold`)."""
        self.unconfirmed: set[str] = set()
        """Containers killed through a pidfd by a failed or cancelled start, whose removal
        nobody waited for: :meth:`kill_all` (the shutdown) waits for it."""

    def hold(self, name: str, attrs: dict[str, object]) -> None:
        """Open a pidfd on the init of started container ``name`` (its inspect ``attrs``)."""
        state = attrs.get("State")
        pid = int((state.get("Pid") if isinstance(state, dict) else 0) or 0)
        init_fd = _pidfd.open_init(pid, str(attrs.get("Id", "")))
        if init_fd is not None:
            self.inits[name] = _pidfd.HeldInit(init_fd, pid)

    def release(self, name: str) -> None:
        """Close the pidfd held for ``name`` (if any)."""
        if (held := self.inits.pop(name, None)) is not None:
            os.close(held.fd)

    def kill_init(self, name: str) -> bool:
        """SIGKILL the sandbox's init through its pidfd; False when there is none to use."""
        held = self.inits.get(name)
        return held is not None and _pidfd.send_kill(held.fd)

    async def kill_all(self, names: Sequence[str]) -> None:
        """Kill every sandbox named at once; return once podman has removed them (and those a
        cancelled start killed), or after :data:`REMOVAL_WAIT`. Never raises.

        SIGKILL goes to each init process through its pidfd (microseconds for all of them),
        through the API for the rest, at most :data:`API_KILLS_AT_ONCE` at a time. Then each is
        removed through the API, as many at once: a removal answered means the container is
        gone, whether this one or podman's auto-removal (conmon's cleanup process) deleted it.
        What is still there after the bound is left to auto-removal (logged).
        """
        removed_by = time.monotonic() + REMOVAL_WAIT  # the worker threads' clock
        through_api = [name for name in names if not self.kill_init(name)]
        limiter = anyio.CapacityLimiter(API_KILLS_AT_ONCE)
        if through_api:
            with anyio.move_on_after(CLEANUP_TIMEOUT):
                async with anyio.create_task_group() as kills:
                    for name in through_api:
                        kills.start_soon(self._api_kill, name, limiter)
        self.unconfirmed.update(names)
        async with anyio.create_task_group() as removals:
            for name in list(self.unconfirmed):
                removals.start_soon(self._confirm_removal, name, removed_by, limiter)
        if left := sorted(self.unconfirmed):
            logger.warning(
                "podman had not removed %d killed sandbox(es) %g s after the kill (its "
                "auto-removal deletes them later): %s%s",
                len(left),
                REMOVAL_WAIT,
                ", ".join(left[:NAMES_LOGGED]),
                ", ..." if len(left) > NAMES_LOGGED else "",
            )
            self.unconfirmed.clear()

    async def _confirm_removal(
        self, name: str, deadline: float, limiter: anyio.CapacityLimiter
    ) -> None:
        # Each request times out at the deadline by itself: no worker thread is left behind to
        # hold the interpreter's exit after the bridge gave up waiting.
        try:
            gone = await anyio.to_thread.run_sync(
                api.remove_killed, self._client, name, deadline, limiter=limiter
            )
        except api.FAILURES as exc:
            logger.warning("could not remove sandbox %s: %s", name, exc)
            return
        if gone:
            self.unconfirmed.discard(name)

    async def _api_kill(self, name: str, limiter: anyio.CapacityLimiter) -> None:
        try:
            await anyio.to_thread.run_sync(api.kill, self._client, name, limiter=limiter)
        except api.FAILURES as exc:
            logger.warning("could not kill sandbox %s: %s", name, exc)

    async def remove_leftovers(self) -> int:
        """Remove our containers whose owner bridge process is gone; return how many."""
        ours = await anyio.to_thread.run_sync(api.list_ours, self._client)
        names = select_leftovers(ContainerRecord(name, labels) for name, labels in ours)
        limiter = anyio.CapacityLimiter(API_KILLS_AT_ONCE)
        async with anyio.create_task_group() as removals:
            for name in names:
                removals.start_soon(self._remove_leftover, name, limiter)
        return len(names)

    async def _remove_leftover(self, name: str, limiter: anyio.CapacityLimiter) -> None:
        try:
            await anyio.to_thread.run_sync(api.remove_quietly, self._client, name, limiter=limiter)
        except api.FAILURES as exc:
            # One that cannot be removed now must not keep the others: the next start retries.
            logger.warning("could not remove leftover sandbox %s: %s", name, exc)
