"""Rewrite the search examples in docs/search.md from real runs over the captured tool lists.

    hatch run tests:python scripts/search_examples.py          # rewrite the doc
    hatch run tests:python scripts/search_examples.py --check  # exit 1 if it is stale

Each example is a fenced block after a ``<!-- search-example: QUERY -->`` marker; its body is
what ``ToolIndex.search(QUERY, limit=3)`` returns over every fixture in
``packages/bridge-core/tests/catalog/fixtures`` (real servers' ``tools/list``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from bridge_core.catalog import ToolDoc, ToolIndex

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/search.md"
FIXTURES = ROOT / "packages/bridge-core/tests/catalog/fixtures"
EXAMPLE = re.compile(r"(<!-- search-example: (?P<query>.+?) -->\n```python\n)(.*?)(```)", re.S)
_DESCRIPTION_CHARS = 40


def real_index() -> ToolIndex:
    docs = []
    for path in sorted(FIXTURES.glob("tools_*.json")):
        server = path.stem.removeprefix("tools_")
        docs += [ToolDoc.from_json(server, t) for t in json.loads(path.read_text())["tools"]]
    return ToolIndex(docs)


def example(index: ToolIndex, query: str) -> str:
    lines = [f"await runtime.search_tool_docs({json.dumps(query)}, limit=3)"]
    hits = index.search(query, limit=3)
    if not hits:
        lines.append("# []  (nothing scores above the threshold)")
    for hit in hits:
        data = hit.to_json()
        description = str(data["description"])
        if len(description) > _DESCRIPTION_CHARS:
            data["description"] = description[:_DESCRIPTION_CHARS].rstrip() + "..."
        lines.append(f"# {json.dumps(data, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def render(text: str) -> str:
    index = real_index()
    return EXAMPLE.sub(lambda m: m.group(1) + example(index, m.group("query")) + m.group(4), text)


def main() -> None:
    text = DOC.read_text()
    rendered = render(text)
    if "--check" in sys.argv[1:]:
        if rendered != text:
            sys.exit(f"{DOC} examples are stale: run scripts/search_examples.py")
        return
    DOC.write_text(rendered)


if __name__ == "__main__":
    main()
