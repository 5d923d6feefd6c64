"""Tool search latency over 1,000 synthetic tools (goal: p50 <= 2 ms).

Run: ``hatch run bench:python bench/search_latency.py [--tools N] [--rounds N]``. Prints the
index build time and p50/p99 per query over a mixed query set (exact words, typos, multi-word,
unrelated), after one warm-up round.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bridge_core.catalog import ToolDoc, ToolIndex

VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "fetch",
    "sync",
    "export",
    "import",
    "archive",
    "scan",
    "render",
]
NOUNS = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "sprint",
    "report",
    "metric",
    "alert",
    "dashboard",
    "contact",
    "lead",
    "deal",
    "campaign",
    "shipment",
    "warehouse",
    "payroll",
    "budget",
    "forecast",
    "playlist",
    "podcast",
    "file",
    "directory",
    "commit",
    "branch",
    "entity",
    "observation",
    "timezone",
    "image",
]
EXTRAS = ["alpha", "beta", "gamma", "delta", "omega", "prime", "neo", "ultra", "mini", "pro"]
QUERIES = [
    "list files",
    "ehco",
    "create invoice",
    "custmer report",
    "what time is it in tokyo",
    "delete the old sprint tickets",
    "archive",
    "export dashboard metrics to csv",
    "weather forecast",
    "xyzzy",
]


def synthetic(count: int, seed: int = 1) -> list[ToolDoc]:
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        verb, noun, extra = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(EXTRAS)
        server = f"{rng.choice(EXTRAS)}-{rng.choice(['crm', 'erp', 'ops', 'media', 'dev'])}"
        description = (
            f"{verb.capitalize()} a {noun} in the {extra} workspace. Returns the {noun} record "
            f"with its id, owner and timestamps; fails when the {noun} does not exist."
        )
        docs.append(ToolDoc(server, f"{verb}_{noun}_{extra}_{i}", description))
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()

    docs = synthetic(args.tools)
    started = time.perf_counter()
    index = ToolIndex(docs)
    build_ms = (time.perf_counter() - started) * 1000

    for query in QUERIES:  # warm-up
        index.search(query)
    samples = []
    for _ in range(args.rounds):
        for query in QUERIES:
            started = time.perf_counter()
            index.search(query, limit=5)
            samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"tools: {args.tools}  queries: {len(samples)}  index build: {build_ms:.1f} ms")
    print(f"search p50: {p50:.3f} ms  p99: {p99:.3f} ms  (goal p50 <= 2 ms)")


if __name__ == "__main__":
    main()
