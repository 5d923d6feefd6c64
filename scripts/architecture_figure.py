"""Draw docs/architecture.svg from the packages' imports: which part of the code imports which.

    python scripts/architecture_figure.py           # write docs/architecture.svg
    python scripts/architecture_figure.py --check   # exit 1 if the committed figure is stale

Each box is one part: a package's top-level modules (``bridge_core``) or one of its subpackages
(``bridge_core.proxy``), coloured by distribution. An arrow runs from the importer to what it
imports, for any import statement of the source tree (``ast``; nothing is imported or run),
those inside functions included; a dashed arrow stands for imports made only for type checking
(``if TYPE_CHECKING:``). Boxes stand on floors: floor 0 imports none of the others, and
every part stands one floor above the highest part it imports. Where parts import each other,
the cycle is broken at its lightest edge (fewest import statements), which is drawn in red
against the floors. The docs build runs ``--check``, so the figure cannot drift from the code.

Only the structure is drawn (parts, edges, floors), not module counts, line counts or import
counts: a change inside a part (a module split, a new import along an existing edge) leaves
the figure as it is, and only a change of the layering makes ``--check`` ask for a new one.

Standard library only (the docs environment has no graphviz), and the output is byte-stable.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parents[1]
PACKAGES = REPO / "packages"
OUTPUT = REPO / "docs" / "architecture.svg"

BOX_WIDTH = 230
BOX_HEIGHT = 36
GAP_X = 28
GAP_Y = 72
MARGIN = 24
LABEL_WIDTH = 64  # the floor numbers on the left
LANE = 10  # the width an arrow takes where it passes a floor
LEGEND_ROW = 20
COLOURS = ("#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3", "#ede9fe", "#e0f2fe", "#f1f5f9")
"""Fills by distribution, in the order of the folders under packages/."""


@dataclass
class Part:
    name: str  # the import name: bridge_core or bridge_core.proxy
    distribution: str
    folder: str
    floor: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass
class Edge:
    source: str
    target: str
    imports: int = 0
    typing_only: bool = True
    against_floors: bool = False


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            test = node.test
            name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", "")
            if name == "TYPE_CHECKING":
                return True
    return False


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an import statement names, absolute; ``from X import y`` names ``X.y`` (a
    submodule, kept if it is one of ours) and ``X``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    return [stem, *(f"{stem}.{alias.name}" for alias in node.names)]


def read_parts() -> tuple[dict[str, Part], dict[tuple[str, str], Edge]]:
    """Every part of every package and the import edges between parts."""
    parts: dict[str, Part] = {}
    sources: list[tuple[str, Path, Path]] = []  # (module, file, part)
    modules: set[str] = set()
    owner: dict[str, str] = {}
    for folder in sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists()):
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        distribution = project["project"]["name"]
        for top in sorted(p for p in (folder / "src").iterdir() if (p / "__init__.py").exists()):
            for path in sorted(top.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                module = _module_name(path, folder / "src")
                pieces = module.split(".")
                sub = len(pieces) > 1 and (top / pieces[1] / "__init__.py").exists()
                part_name = ".".join(pieces[:2]) if sub else pieces[0]
                parts.setdefault(part_name, Part(part_name, distribution, folder.name))
                modules.add(module)
                owner[module] = part_name
                sources.append((module, path, top))
    edges: dict[tuple[str, str], Edge] = {}
    for module, path, _top in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            named = [m for m in _imported(node, module, is_package) if m in modules]
            # `from X import y`: the submodule X.y when y is one, else X itself.
            targets = {m for m in named if not any(o.startswith(m + ".") for o in named)}
            for target in sorted(targets):
                source, dest = owner[module], owner[target]
                if source == dest:
                    continue
                edge = edges.setdefault((source, dest), Edge(source, dest))
                edge.imports += 1
                edge.typing_only &= _in_type_checking(node, parents)
    return parts, edges


def _reachable(
    start: str, edges: dict[tuple[str, str], Edge], skip: set[tuple[str, str]]
) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        for a, b in edges:
            if a == node and (a, b) not in skip and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def assign_floors(parts: dict[str, Part], edges: dict[tuple[str, str], Edge]) -> None:
    """Break every cycle at its lightest edge, then put each part one floor above what it
    imports."""
    against: set[tuple[str, str]] = set()
    while True:
        cyclic = [
            key
            for key in sorted(edges)
            if key not in against and key[0] in _reachable(key[1], edges, against)
        ]
        if not cyclic:
            break
        against.add(min(cyclic, key=lambda key: (edges[key].imports, key)))
    for key in against:
        edges[key].against_floors = True
    floor: dict[str, int] = {}

    def height(name: str) -> int:
        if name not in floor:
            below = [b for (a, b), e in edges.items() if a == name and not e.against_floors]
            floor[name] = 1 + max((height(b) for b in below), default=-1)
        return floor[name]

    for name, part in parts.items():
        part.floor = height(name)


@dataclass
class Layout:
    width: float
    height: float
    route: dict[tuple[str, str], list[tuple[float, float]]]
    """Per edge, where it passes each floor it crosses (x, top of the floor's row)."""


def arrange(parts: dict[str, Part], edges: dict[tuple[str, str], Edge]) -> Layout:
    """Place the boxes, floor 0 at the bottom. An arrow that crosses floors takes a lane of its
    own between the boxes of each floor it crosses (a waypoint that is ordered like a box), and
    within a floor boxes and lanes are ordered so that arrows cross little: each moves toward the
    mean position of what it is linked to, a few sweeps, ties by name."""
    rows: dict[int, list[str]] = defaultdict(list)
    for name in sorted(parts, key=lambda n: (parts[n].folder, n)):
        rows[parts[name].floor].append(name)
    links: list[tuple[str, str]] = []
    lanes: dict[tuple[str, str], list[str]] = {}
    for (a, b), edge in sorted(edges.items()):
        if edge.against_floors:
            links.append((a, b))
            continue
        chain = [a]
        for level in range(parts[a].floor - 1, parts[b].floor, -1):
            waypoint = f"{a}>{b}@{level}"
            rows[level].append(waypoint)
            chain.append(waypoint)
        lanes[(a, b)] = chain[1:]
        chain.append(b)
        links.extend(itertools.pairwise(chain))
    neighbours: dict[str, list[str]] = defaultdict(list)
    for a, b in links:
        neighbours[a].append(b)
        neighbours[b].append(a)

    def size(name: str) -> float:
        return BOX_WIDTH if name in parts else LANE

    def place(row: list[str]) -> dict[str, float]:
        """Left-to-right centres of a row's items, packed and centred on 0."""
        total = sum(size(n) for n in row) + GAP_X * (len(row) - 1)
        centres, x = {}, -total / 2
        for name in row:
            centres[name] = x + size(name) / 2
            x += size(name) + GAP_X
        return centres

    centre: dict[str, float] = {}
    for row in rows.values():
        centre.update(place(row))
    for _ in range(8):
        for level in sorted(rows):
            row = rows[level]
            row.sort(
                key=lambda n: (
                    sum(centre[m] for m in neighbours[n] or [n]) / len(neighbours[n] or [n]),
                    n,
                )
            )
            centre.update(place(row))
    left = min(centre[n] - size(n) / 2 for n in centre)
    right = max(centre[n] + size(n) / 2 for n in centre)
    top = max(rows)

    def row_top(level: int) -> float:
        return MARGIN + (top - level) * (BOX_HEIGHT + GAP_Y)

    shift = MARGIN + LABEL_WIDTH - left
    for name, part in parts.items():
        part.x = centre[name] + shift - BOX_WIDTH / 2
        part.y = row_top(part.floor)
    route = {
        key: [(centre[w] + shift, row_top(int(w.rsplit("@", 1)[1]))) for w in chain]
        for key, chain in lanes.items()
    }
    width = right - left + MARGIN * 2 + LABEL_WIDTH
    height = row_top(0) + BOX_HEIGHT + MARGIN
    return Layout(round(width), round(height), route)


def _ports(names: list[str], left: float) -> dict[str, float]:
    """x positions spread along a box's edge, one per arrow, in the order of where they go."""
    step = BOX_WIDTH / (len(names) + 1)
    return {name: left + step * (i + 1) for i, name in enumerate(names)}


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    bend = (y2 - y1) / 2
    return f"C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2:.1f}"


def render(parts: dict[str, Part], edges: dict[tuple[str, str], Edge]) -> str:
    layout = arrange(parts, edges)
    width, height = layout.width, layout.height
    folders = sorted({p.folder for p in parts.values()})
    fill = {folder: COLOURS[i % len(COLOURS)] for i, folder in enumerate(folders)}
    distributions = {p.folder: p.distribution for p in parts.values()}
    legend_top = height
    height += LEGEND_ROW * (len(folders) + 3) + MARGIN
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
        "<title>Which part of the code imports which, by floor "
        "(generated by scripts/architecture_figure.py)</title>",
        "<defs>",
        '<marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#475569"/></marker>',
        '<marker id="head-against" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#dc2626"/></marker>',
        "</defs>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for level in sorted({p.floor for p in parts.values()}):
        y = next(p.y for p in parts.values() if p.floor == level) + BOX_HEIGHT / 2 + 4
        out.append(f'<text x="{MARGIN}" y="{y:.1f}" fill="#64748b">floor {level}</text>')

    def first_x(key: tuple[str, str]) -> float:  # where an arrow goes after leaving its box
        lane = layout.route.get(key)
        return lane[0][0] if lane else parts[key[1]].x

    def last_x(key: tuple[str, str]) -> float:  # where it comes from before reaching its box
        lane = layout.route.get(key)
        return lane[-1][0] if lane else parts[key[0]].x

    outgoing = {
        name: _ports(
            sorted((b for a, b in edges if a == name), key=lambda b: (first_x((name, b)), b)),
            parts[name].x,
        )
        for name in parts
    }
    incoming = {
        name: _ports(
            sorted((a for a, b in edges if b == name), key=lambda a: (last_x((a, name)), a)),
            parts[name].x,
        )
        for name in parts
    }
    for (a, b), edge in sorted(edges.items(), key=lambda item: (item[1].against_floors, item[0])):
        source, target = parts[a], parts[b]
        x1, x2 = outgoing[a][b], incoming[b][a]
        if edge.against_floors:  # from the importer's top up to the imported's bottom
            d = f"M{x1:.1f},{source.y:.1f} " + _curve(x1, source.y, x2, target.y + BOX_HEIGHT)
        else:
            d, x, y = f"M{x1:.1f},{source.y + BOX_HEIGHT:.1f}", x1, source.y + BOX_HEIGHT
            for lane_x, lane_top in layout.route.get((a, b), []):
                d += f" {_curve(x, y, lane_x, lane_top)} L{lane_x:.1f},{lane_top + BOX_HEIGHT:.1f}"
                x, y = lane_x, lane_top + BOX_HEIGHT
            d += " " + _curve(x, y, x2, target.y)
        colour = "#dc2626" if edge.against_floors else "#475569"
        marker = "head-against" if edge.against_floors else "head"
        dash = ' stroke-dasharray="5,4"' if edge.typing_only else ""
        kind = "imports only for type checking" if edge.typing_only else "imports"
        title = f"{a} {kind} {b}" + (" (against the floors)" if edge.against_floors else "")
        out.append(
            f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.4" '
            f'stroke-opacity="0.8"{dash} marker-end="url(#{marker})">'
            f"<title>{escape(title)}</title></path>"
        )
    for name in sorted(parts):
        part = parts[name]
        out.append(
            f"<g><title>{escape(name)} ({escape(part.distribution)})</title>"
            f'<rect x="{part.x:.1f}" y="{part.y:.1f}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" '
            f'rx="6" fill="{fill[part.folder]}" stroke="#334155"/>'
            f'<text x="{part.x + BOX_WIDTH / 2:.1f}" y="{part.y + 23:.1f}" text-anchor="middle" '
            f'font-family="monospace" font-weight="bold">{escape(name)}</text></g>'
        )
    y = legend_top + MARGIN / 2
    for folder in folders:
        out.append(
            f'<rect x="{MARGIN}" y="{y:.1f}" width="14" height="14" rx="3" '
            f'fill="{fill[folder]}" stroke="#334155"/>'
            f'<text x="{MARGIN + 22}" y="{y + 12:.1f}">packages/{escape(folder)} '
            f"({escape(distributions[folder])})</text>"
        )
        y += LEGEND_ROW
    notes = [
        ("#475569", "", "imports (from the importer to what it imports)"),
        ("#475569", ' stroke-dasharray="5,4"', "imports for type checking only"),
        ("#dc2626", "", "an import against the floors: the lightest edge of a cycle"),
    ]
    for colour, dash, text in notes:
        out.append(
            f'<line x1="{MARGIN}" y1="{y + 7:.1f}" x2="{MARGIN + 14}" y2="{y + 7:.1f}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{MARGIN + 22}" y="{y + 12:.1f}">{escape(text)}</text>'
        )
        y += LEGEND_ROW
    out.append("</svg>")
    return "\n".join(out) + "\n"


def figure() -> str:
    parts, edges = read_parts()
    assign_floors(parts, edges)
    return render(parts, edges)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed SVG is stale")
    args = parser.parse_args(argv)
    svg = figure()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != svg:
            print(
                f"{OUTPUT.relative_to(REPO)} does not match the packages' imports: "
                "run `python scripts/architecture_figure.py` and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    OUTPUT.write_text(svg, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
