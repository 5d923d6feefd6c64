"""What the output cap of ``run_python`` keeps and what it costs: its default, by measurement.

Runs a corpus of cells a model writes in data work (real sandboxes, the standard image, the cap
lifted so each output is whole), counts each output's characters and tokens, then, for each
candidate cap, how many of the outputs a model *meant to read* come back whole and how many
tokens the whole corpus and the worst accidental dump cost. A cell is "meant" when it prints a
summary, a sample, a traceback, a docstring or a log a model reads in full; "dump" when it prints
a whole table or list that nobody reads line by line (the head and tail, and the full output in
the session's spill file, are what a model needs of it).

Usage: ``hatch run bench-tokens:python bench/output_cap.py [--image IMAGE] [--json FILE]``.
Token counts use the legacy Claude tokenizer of ``anthropic==0.34.2`` (offline; a close proxy of
current models' counts, not exact billing). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
from anthropic._tokenizers import sync_get_tokenizer
from bridge_core.gateway import NullGateway
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import SessionConfig, SessionManager
from bridge_image import names

DEFAULT_IMAGE = os.environ.get("MCP_BRIDGE_IMAGE", names.DEFAULT_IMAGE)
CAPS = (8 * 1024, 16 * 1024, 24 * 1024, 32 * 1024, 64 * 1024)
"""The candidate caps, in characters (64 KiB was the default before this measurement)."""

_SETUP = """
import json, numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({
    "city": rng.choice(["Berlin", "Lagos", "Lima", "Osaka", "Perth", "Quito"], 1000),
    "day": pd.date_range("2026-01-01", periods=1000, freq="h"),
    "temp_c": rng.normal(18, 6, 1000).round(1),
    "rain_mm": rng.gamma(1.2, 2.0, 1000).round(2),
    "wind_kmh": rng.normal(14, 5, 1000).round(1),
    "station": [f"ST-{i % 37:03d}" for i in range(1000)],
})
records = [
    {"id": i, "title": f"Issue {i}: crash when parsing input file", "state": "open",
     "labels": ["bug", "parser"], "author": f"user{i % 13}", "comments": i % 9,
     "body": "Steps to reproduce: run the parser on the attached file; it stops with an error."}
    for i in range(200)
]
"""

CORPUS: tuple[tuple[str, str, str], ...] = (
    # (name, kind, code): kind "meant" (read in full) or "dump" (head and tail are enough)
    ("expression", "meant", "6 * 7"),
    ("print a frame (pandas' own truncation)", "meant", "print(df)"),
    ("describe()", "meant", "print(df.describe())"),
    ("head(20) as the last expression", "meant", "df.head(20)"),
    ("info()", "meant", "df.info()"),
    ("groupby summary", "meant", "df.groupby('city')[['temp_c', 'rain_mm']].agg(['mean', 'max'])"),
    ("correlation matrix", "meant", "print(df[['temp_c', 'rain_mm', 'wind_kmh']].corr())"),
    ("sample(50)", "meant", "print(df.sample(50, random_state=1))"),
    ("five tool records as JSON", "meant", "print(json.dumps(records[:5], indent=2))"),
    ("numpy array repr", "meant", "print(np.arange(10000).reshape(100, 100))"),
    ("a traceback from pandas", "meant", "df['temperature'].mean()"),
    ("help() of one function", "meant", "help(pd.DataFrame.merge)"),
    ("progress log, 100 lines", "meant", "for i in range(100):\n    print(f'step {i}: ok')"),
    (
        "a 200-line file read to check it",
        "meant",
        "print('\\n'.join(f'{i:3} ' + 'lorem ipsum dolor ' * 5 for i in range(200)))",
    ),
    ("dir() of a module", "meant", "dir(json)"),
    ("whole frame to_string()", "dump", "print(df.to_string())"),
    ("whole frame to_csv()", "dump", "print(df.to_csv())"),
    ("200 tool records as JSON", "dump", "print(json.dumps(records, indent=2))"),
    ("a list of 100,000 numbers", "dump", "print(list(range(100_000)))"),
    ("dir() of pandas with docs", "dump", "help(pd.Series)"),
)


@dataclass(frozen=True)
class Measured:
    name: str
    kind: str
    chars: int
    tokens: int


async def measure(image: str) -> list[Measured]:
    tokenizer = sync_get_tokenizer()
    measured = []
    with tempfile.TemporaryDirectory(prefix="bench-output-cap-") as tmp:
        state = Path(tmp)
        runtime = await PodmanBackend.connect(state_dir=state)
        config = SessionConfig(image=image, pool_size=0, output_cap=64 * 1024 * 1024)
        try:
            async with SessionManager(
                config, runtime=runtime, gateway=NullGateway(), state_dir=state
            ) as manager:
                await manager.execute(_SETUP, timeout=120)
                for name, kind, code in CORPUS:
                    result = await manager.execute(code, timeout=120)
                    text = "".join(
                        part or ""
                        for part in (
                            result.stdout,
                            result.stderr,
                            result.value,
                            result.error.traceback if result.error else None,
                        )
                    )
                    tokens = len(tokenizer.encode(text).ids)
                    measured.append(Measured(name, kind, len(text), tokens))
                    print(f"  {name:<42} {kind:<6} {len(text):>9,} chars {tokens:>8,} tokens")
        finally:
            await runtime.aclose()
    return measured


def tokens_at(item: Measured, cap: int) -> int:
    """Tokens a result costs under ``cap`` characters (the cut keeps the same token density)."""
    if item.chars <= cap:
        return item.tokens
    return round(item.tokens * cap / item.chars)


def summarise(measured: list[Measured]) -> list[dict[str, object]]:
    meant = [m for m in measured if m.kind == "meant"]
    dumps = [m for m in measured if m.kind == "dump"]
    rows = []
    print(
        f"\n{'cap (chars)':>12} {'meant kept whole':>17} {'corpus tokens':>14} "
        f"{'worst dump tokens':>18}"
    )
    for cap in CAPS:
        whole = sum(m.chars <= cap for m in meant)
        total = sum(tokens_at(m, cap) for m in measured)
        worst = max((tokens_at(m, cap) for m in dumps), default=0)
        rows.append(
            {
                "cap": cap,
                "meant_whole": whole,
                "meant": len(meant),
                "tokens": total,
                "worst_dump_tokens": worst,
            }
        )
        print(f"{cap:>12,} {f'{whole}/{len(meant)}':>17} {total:>14,} {worst:>18,}")
    largest = max(meant, key=lambda m: m.chars)
    print(
        f"\nlargest output meant to be read: {largest.name} ({largest.chars:,} characters, "
        f"{largest.tokens:,} tokens)"
    )
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    print(f"image {args.image}; each cell's whole output (cap lifted):")
    measured = await measure(args.image)
    rows = summarise(measured)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"cells": [vars(m) for m in measured], "caps": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    anyio.run(main)
