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
    """A start that waits until released and records what each start was told to import."""

    def __init__(self) -> None:
        self.imports: list[Preimport] = []
        self.release = anyio.Event()

    async def __call__(self, preimport: Preimport) -> _Sandbox:
        self.imports.append(preimport)
        await self.release.wait()
        return _Sandbox(f"s{len(self.imports)}")


async def _take_while_the_pool_starts(
    pool_imports: Preimport, needed: Preimport
) -> list[Preimport]:
    starts = _Starts()
    async with anyio.create_task_group() as tg:
        pool = SandboxPool(1, start=starts, discard=lambda _: None, task_group=tg)  # type: ignore[arg-type]
        pool.preimport = pool_imports
        pool.fill()
        await anyio.wait_all_tasks_blocked()

        async def take() -> None:
            await pool.take(needed)

        tg.start_soon(take)
        await anyio.wait_all_tasks_blocked()
        begun = list(starts.imports)
        starts.release.set()
        await anyio.wait_all_tasks_blocked()
        pool.drain()
        tg.cancel_scope.cancel()
    return begun


async def test_a_caller_whose_modules_the_pool_imports_waits_for_the_pools_start() -> None:
    begun = await _take_while_the_pool_starts(("pandas", "numpy"), ("numpy",))
    assert begun == [("pandas", "numpy")], "no second container start for the same imports"


async def test_a_caller_needing_other_modules_gets_a_start_of_its_own() -> None:
    begun = await _take_while_the_pool_starts(("numpy",), ("fractions",))
    assert begun == [("numpy",), ("fractions",)]
