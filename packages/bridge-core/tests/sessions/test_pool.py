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
