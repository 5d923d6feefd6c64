"""Bar chart of the ratios to the floor, before and after, from ``bench/floor.py --json``.

    hatch run tests:python bench/floor_chart.py FIGURES.json docs/floor-ratios.svg

FIGURES.json comes from a run with ``--baseline`` (the code before: "before"; the bridge of this
checkout: "after"), so both were measured in the same run.

One group of bars per figure (bridge / floor: 1.0 is the floor itself), the goal of each figure
as a mark. Draws with matplotlib's Agg backend; the format follows the output's suffix.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from bridge_core.sessions.types import OUTPUT_CAP  # the default MCP_BRIDGE_OUTPUT_CAP

FIGURES = (
    ("warm run_python('1+1')\nvs direct echo", "warm", 2.0),
    ("echo from sandbox code\nvs direct echo", "proxied", 1.3),
    ("spawn + initialize\nvs mcp-server-time", "start", 1.1),
    ("result of a 10 MB print\nvs the output cap", "result_bytes", 1 + 1024 / OUTPUT_CAP),
)


def ratio(figures: dict[str, Any], key: str, bridge: str) -> float:
    pair = figures[key]
    if key == "start":
        floor = pair.get("mcp-server-time", pair["minimal SDK server"])
        return float(pair[bridge] / floor)
    return float(pair[bridge] / pair["floor"])


def draw(figures: dict[str, Any], out: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.38
    for index, (_, key, goal) in enumerate(FIGURES):
        for offset, (name, bridge, colour) in enumerate(
            (("before", "baseline", "#b0b7c3"), ("after", "bridge", "#2f6db5"))
        ):
            value = ratio(figures, key, bridge)
            x = index + (offset - 0.5) * width
            ax.bar(x, value, width, color=colour, label=name if index == 0 else None)
            ax.annotate(f"{value:.2f}x", (x, value), ha="center", va="bottom", fontsize=8)
        ax.hlines(goal, index - 0.45, index + 0.45, colors="#c0392b", linestyles="dashed",
                  label="goal" if index == 0 else None)  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(FIGURES)), [label for label, _, _ in FIGURES], fontsize=8)
    ax.set_ylabel("bridge / floor (1.0 = the floor)")
    ax.set_title("The bridge against its floor, measured in the same run")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figures", type=Path, help="from bench/floor.py --baseline ... --json")
    parser.add_argument("out", type=Path, help="the picture (.svg or .png)")
    opts = parser.parse_args()
    draw(json.loads(opts.figures.read_text()), opts.out)


if __name__ == "__main__":
    main()
