"""The warm pool's choice between its own next start and a start for one caller alone."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import pytest
from bridge_core.sessions._pool import Preimport, SandboxPool

pytestmark = pytest.mark.anyio


@dataclass
class _Sandbox:
    name: str
    alive: bool = True


class _Starts:
    """Starts that each wait until released; records what each was told to import."""

    def __init__(self) -> None:
        self.imports: list[Preimport] = []
        self.releases: list[anyio.Event] = []

    async def __call__(self, preimport: Preimport) -> _Sandbox:
        self.imports.append(preimport)
        name = f"s{len(self.imports)}"  # s1: the first start begun
        release = anyio.Event()
        self.releases.append(release)
        await release.wait()
        return _Sandbox(name)


async def _take_while_the_pool_starts(
    pool_imports: Preimport, needed: Preimport
) -> tuple[list[Preimport], str]:
    """What each start was told to import, and the name of the sandbox the caller got."""
    starts = _Starts()
    async with anyio.create_task_group() as tg:
        pool = SandboxPool(1, start=starts, discard=lambda _: None, task_group=tg)  # type: ignore[arg-type]
        pool.preimport = pool_imports
        pool.fill()
        await anyio.wait_all_tasks_blocked()

        got: list[str] = []

        async def take() -> None:
            got.append((await pool.take(needed)).name)

        tg.start_soon(take)
        await anyio.wait_all_tasks_blocked()
        begun = list(starts.imports)
        for release in starts.releases:  # one by one, in the order begun
            release.set()
            await anyio.wait_all_tasks_blocked()
            if got:
                break
        pool.drain()
        tg.cancel_scope.cancel()
    return begun, got[0]


async def test_a_caller_whose_modules_the_pool_imports_waits_for_the_pools_start() -> None:
    begun, got = await _take_while_the_pool_starts(("pandas", "numpy"), ("numpy",))
    assert got == "s1", "the pool's start under way, begun first, serves the caller"
    assert ("numpy",) not in begun, "no start of the caller's own"


async def test_a_caller_needing_other_modules_gets_a_start_of_its_own() -> None:
    begun, got = await _take_while_the_pool_starts(("numpy",), ("fractions",))
    assert begun == [("numpy",), ("fractions",)]
    assert got == "s2", "its own start, which imports what its state needs"


class _InstantStarts:
    """Starts that finish at once; counts them."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, preimport: Preimport) -> _Sandbox:
        self.count += 1
        await anyio.lowlevel.checkpoint()
        return _Sandbox(f"s{self.count}")


async def _hits_of_back_to_back_takes(takes: int) -> list[bool]:
    """A pool of one, filled; then ``takes`` takes, each right after the one before (the pool's
    refills finish only when the takers let them run, as a start that takes time would)."""
    starts = _InstantStarts()
    hits: list[bool] = []
    async with anyio.create_task_group() as tg:
        pool = SandboxPool(1, start=starts, discard=lambda _: None, task_group=tg)  # type: ignore[arg-type]
        pool.fill()
        await anyio.wait_all_tasks_blocked()
        for _ in range(takes):
            before = pool.hits
            await pool.take()
            hits.append(pool.hits > before)
        # A miss, then what its refills stocked while nobody took: the next takes find it.
        await anyio.wait_all_tasks_blocked()
        for _ in range(2):
            before = pool.hits
            await pool.take()
            hits.append(pool.hits > before)
        pool.drain()
        tg.cancel_scope.cancel()
    return hits


async def test_after_a_miss_the_pool_keeps_more_than_one_ready_for_back_to_back_takes() -> None:
    # hit (the warm one), miss (its one refill not done yet): the miss raises the target, so
    # the two takes after the refills ran both find a warm sandbox (with a fixed target of one,
    # the second waited for a start again).
    assert await _hits_of_back_to_back_takes(2) == [True, False, True, True]


async def test_a_burst_ends_after_a_quiet_spell_and_the_extra_sandboxes_are_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bridge_core.sessions import _pool

    monkeypatch.setattr(_pool, "BURST_QUIET", 0.05)
    starts = _InstantStarts()
    discarded: list[str] = []
    stopped = anyio.Event()

    def discard(live: _Sandbox) -> None:
        discarded.append(live.name)
        stopped.set()

    async with anyio.create_task_group() as tg:
        pool = SandboxPool(1, start=starts, discard=discard, task_group=tg)  # type: ignore[arg-type]
        pool.fill()
        await anyio.wait_all_tasks_blocked()
        await pool.take()
        await pool.take()  # a miss: one more kept ready
        await anyio.wait_all_tasks_blocked()
        assert pool.ready == 2
        with anyio.fail_after(5):
            await stopped.wait()
        assert pool.ready == 1, "back to the configured target"
        assert len(discarded) == 1
        pool.drain()
        tg.cancel_scope.cancel()


async def test_a_pool_of_zero_stays_empty_after_misses() -> None:
    starts = _InstantStarts()
    async with anyio.create_task_group() as tg:
        pool = SandboxPool(0, start=starts, discard=lambda _: None, task_group=tg)  # type: ignore[arg-type]
        for _ in range(3):
            await pool.take()
        await anyio.wait_all_tasks_blocked()
        assert pool.ready == 0
        assert starts.count == 3, "one start per take, none ahead"
        pool.drain()
        tg.cancel_scope.cancel()
