"""The check before running: how many mistakes it stops, how many correct cells it blocks, and
what it costs per cell.

Run: ``hatch run bench:python bench/check_before_running.py [--rounds N]``. The cells are
``packages/bridge-core/tests/catalog/fixtures/check_cells.toml`` (model-written cells with one
mistake each, and correct ones) checked against the tool lists recorded from the real reference
servers (``tools_<server>.json`` beside it). Cost: the host's work per ``run_python`` as the bridge
does it (the check in a worker thread), p50/p99 per cell, beside the same path with the check off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tomllib
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
from bridge_core.catalog import CheckCatalog, ToolDoc, check_cell

FIXTURES = Path(__file__).resolve().parents[1] / "packages/bridge-core/tests/catalog/fixtures"
SERVERS = ("everything", "filesystem", "memory", "time")


def _catalog() -> CheckCatalog:
    tools = {}
    for server in SERVERS:
        data = json.loads((FIXTURES / f"tools_{server}.json").read_text(encoding="utf-8"))
        tools[server] = [ToolDoc.from_json(server, tool) for tool in data["tools"]]
    return CheckCatalog(tools, SERVERS)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:.3f} ms, p99 {p99 * 1000:.3f} ms"


async def _cost(cells: list[str], catalog: CheckCatalog, rounds: int) -> tuple[str, str]:
    on: list[float] = []
    off: list[float] = []
    for _ in range(rounds):
        for code in cells:
            started = time.perf_counter()
            await anyio.to_thread.run_sync(check_cell, code, catalog)
            on.append(time.perf_counter() - started)
            started = time.perf_counter()
            await anyio.lowlevel.checkpoint()  # mode off: nothing between the call and the run
            off.append(time.perf_counter() - started)
    return _ms(on), _ms(off)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    catalog = _catalog()
    cells = tomllib.loads((FIXTURES / "check_cells.toml").read_text(encoding="utf-8"))
    mistakes, correct = cells["mistake"], cells["correct"]
    stopped = [c for c in mistakes if check_cell(c["code"], catalog)]
    blocked = [c for c in correct if check_cell(c["code"], catalog)]
    print(f"mistakes stopped: {len(stopped)}/{len(mistakes)} ({len(stopped) / len(mistakes):.0%})")
    print(f"correct cells wrongly blocked: {len(blocked)}/{len(correct)}")
    for cell in mistakes:
        if cell not in stopped:
            print(
                f"  not stopped ({cell['kind'] or 'not a shape mistake'}): {cell['code'].strip()}"
            )
    codes = [c["code"] for c in mistakes + correct]
    on, off = anyio.run(_cost, codes, catalog, args.rounds)
    print(f"per cell, check on (worker thread, as the bridge runs it): {on}")
    print(f"per cell, check off: {off}")


if __name__ == "__main__":
    main()
