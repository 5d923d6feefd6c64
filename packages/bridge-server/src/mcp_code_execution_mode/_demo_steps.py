"""What the demo asks the bridge to run, step by step, as an LLM would write it.

``{data}`` is replaced by the demo's data directory (served by the filesystem server).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DemoStep", "SALES", "steps"]

SALES = {
    "north.csv": "month,revenue\njan,120\nfeb,135\nmar,150\n",
    "south.csv": "month,revenue\njan,90\nfeb,80\nmar,110\n",
    "west.csv": "month,revenue\njan,200\nfeb,210\nmar,190\n",
}
"""Files the filesystem server exposes to the demo."""


@dataclass(frozen=True, slots=True)
class DemoStep:
    title: str
    code: str
    needs: tuple[str, ...] = ()
    """Servers the step uses; it is skipped (and said so) when one is missing."""
    session: str | None = None


_DISCOVER = """\
from mcp import runtime
servers = await runtime.discovered_servers()
servers
"""

_SEARCH = """\
hits = await runtime.search_tool_docs("read a text file", limit=3)
[(h["server"], h["tool"]) for h in hits]
"""

_QUERY = """\
docs = await runtime.query_tool_docs("filesystem")
[t["name"] for t in docs["tools"]][:8]
"""

_LOOP = """\
from mcp import mcp_servers
fs = mcp_servers["filesystem"]

listing = await fs.list_directory(path="{data}")
files = sorted(line.split("] ", 1)[1] for line in listing.splitlines()
               if line.startswith("[FILE]") and line.endswith(".csv"))
totals = {{}}
for done, name in enumerate(files, 1):
    rows = (await fs.read_text_file(path=f"{data}/{{name}}")).splitlines()[1:]
    totals[name.removesuffix(".csv")] = sum(int(r.split(",")[1]) for r in rows)
    runtime.progress(done, len(files), f"read {{name}}")
best = max(totals, key=totals.get)
print(f"revenue by region: {{totals}}; best: {{best}}")
"""

_PERSIST = """\
# Same session: `totals` and `best` are still here from the previous call.
share = {{region: round(100 * value / sum(totals.values()), 1) for region, value in totals.items()}}
share, best
"""

_ORCHESTRATE = """\
from mcp import mcp_servers
import asyncio

async def with_retries(call, attempts=3):
    for attempt in range(attempts):
        try:
            return await call()
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.1 * 2 ** attempt)

now = await with_retries(lambda: mcp_servers["time"].get_current_time(timezone="UTC"))
await mcp_servers["memory"].create_entities(entities=[
    {{"name": f"region-{{region}}", "entityType": "sales",
      "observations": [f"Q1 revenue {{value}} (as of {{now['datetime']}})"]}}
    for region, value in totals.items()
])
graph = await mcp_servers["memory"].read_graph()
[(e["name"], e["observations"][0]) for e in graph["entities"]]
"""

_ECHO = """\
from mcp import mcp_everything
await mcp_everything.echo(message=f"best region: {{best}}")
"""


def steps(data: str) -> list[DemoStep]:
    """The demo's calls, with the data directory filled in."""

    def fill(code: str) -> str:
        return code.format(data=data)

    return [
        DemoStep("discover the servers", fill(_DISCOVER)),
        DemoStep("search tool docs across every server", fill(_SEARCH)),
        DemoStep("query one server's tool docs", fill(_QUERY), ("filesystem",)),
        DemoStep("call tools in a loop, aggregate in plain Python", fill(_LOOP), ("filesystem",)),
        DemoStep("a second call proves the session persisted", fill(_PERSIST), ("filesystem",)),
        DemoStep(
            "orchestrate two servers with retries",
            fill(_ORCHESTRATE),
            ("filesystem", "time", "memory"),
        ),
        DemoStep("attribute-style call", fill(_ECHO), ("filesystem", "everything")),
    ]
