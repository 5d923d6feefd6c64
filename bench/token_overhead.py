"""Prompt tokens that tool definitions cost: five real MCP servers listed directly vs the bridge.

A client connected to MCP servers puts every tool's name, description and input schema into the
model's context on every request. This script starts the five offline servers of
``scripts/prepare-servers`` (everything, filesystem, memory, time, git), takes each one's
``tools/list`` answer as the client receives it, and counts its tokens; then it does the same for
the bridge configured with the same five servers (its ``tools/list`` is one tool, ``run_python``,
whatever is configured behind it), and the bridge's direct and both modes (``serve --tools``:
each proxied tool listed by itself as ``server__tool``, its definition kept).

Then a task, in three columns: what a client pays in tool definitions for a task that uses a few
tools (``--used``, default: read a CSV, write its summary, note it in the memory graph).

* all schemas up front: every tool's full definition, on every request (the table above);
* deferred schemas: a client that defers loading (a tool search of its own) lists each tool's
  name and the first sentence of its description up front, and adds a tool's full definition
  once, when the model picks it. Its own search tool's definition is not counted (it favours
  this column);
* the bridge: ``run_python`` up front; the model reads the definition of each tool it uses with
  ``runtime.query_tool_docs(server, tool, detail="full")``, counted as the text of the real
  ``run_python`` result (a real sandbox: podman and the image are needed).

Loaded definitions stay in the conversation, so a task's figure is what its context holds in tool
definitions once those tools were used; the up-front figure is paid on every request before that.

    hatch run bench-tokens:python bench/token_overhead.py [--used server.tool,...]

Token counts use the legacy Claude tokenizer shipped in PyPI ``anthropic==0.34.2`` (offline; it
is not the tokenizer of current models, so read the figures as a close proxy, not exact billing).
Tools are serialised as compact JSON of ``{name, description, inputSchema}`` (plus any other field
the server sent), which is what clients forward to the model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import anyio
from anthropic._tokenizers import sync_get_tokenizer
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"
# A typical small task: read a CSV, write its summary, note the result in the knowledge graph.
TASK = "filesystem.read_text_file,filesystem.write_file,memory.create_entities"


def _server_paths() -> dict[str, str]:
    if not SERVERS_ENV.is_file():
        sys.exit(f"{SERVERS_ENV} is missing: run scripts/prepare-servers first")
    values = {}
    for line in SERVERS_ENV.read_text().splitlines():
        if line.startswith("export "):
            name, _, raw = line.removeprefix("export ").partition("=")
            values[name] = shlex.split(raw)[0]
    return values


def _servers(paths: dict[str, str], work: Path) -> dict[str, dict[str, Any]]:
    """The five servers with throwaway data under ``work``."""
    data = work / "data"
    data.mkdir()
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # mcp-server-git needs one
    return {
        "everything": {"command": paths["MCP_SERVER_EVERYTHING"], "args": ["stdio"]},
        "filesystem": {"command": paths["MCP_SERVER_FILESYSTEM"], "args": [str(data)]},
        "memory": {
            "command": paths["MCP_SERVER_MEMORY"],
            "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")},
        },
        "time": {"command": paths["MCP_SERVER_TIME"], "args": ["--local-timezone", "UTC"]},
        "git": {"command": paths["MCP_SERVER_GIT"], "args": ["--repository", str(repo)]},
    }


async def _tools_json(command: str, args: list[str], env: dict[str, str], quiet: TextIO) -> str:
    """The server's ``tools/list`` answer as compact JSON, as a client forwards it."""
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    with anyio.fail_after(120):
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
    tools = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools]
    return json.dumps(tools, separators=(",", ":"), ensure_ascii=False)


CSV_ROWS = 500
"""Rows of the task's sales CSV (date, region, product, units, price): a small export."""
REGIONS = ("north", "south", "east", "west", "central")
PRODUCTS = ("widget", "gadget", "gizmo", "doohickey")


def _sales_csv() -> str:
    """The task's CSV, deterministic (no random numbers: the figure must repeat)."""
    lines = ["date,region,product,units,price"]
    for i in range(CSV_ROWS):
        day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        units = 1 + (i * 37) % 50
        price = 5 + (i * 13) % 95
        lines.append(f"{day},{REGIONS[i % 5]},{PRODUCTS[i % 4]},{units},{price}.00")
    return "\n".join(lines) + "\n"


def _summary(csv_text: str) -> str:
    """The summary the task writes: revenue per region, as the model would compute it."""
    revenue: dict[str, float] = {}
    for line in csv_text.splitlines()[1:]:
        _date, region, _product, units, price = line.split(",")
        revenue[region] = revenue.get(region, 0.0) + int(units) * float(price)
    return "\n".join(f"{r}: {v:,.2f}" for r, v in sorted(revenue.items()))


BRIDGE_TASK_CODE = """\
import pandas as pd, io
from mcp import mcp_servers
fs, memory = mcp_servers["filesystem"], mcp_servers["memory"]
text = await fs.read_text_file(path=f"{DATA}/sales.csv")
df = pd.read_csv(io.StringIO(text))
df["revenue"] = df["units"] * df["price"]
summary = "\\n".join(f"{r}: {v:,.2f}" for r, v in df.groupby("region")["revenue"].sum().items())
await fs.write_file(path=f"{DATA}/summary.txt", content=summary)
await memory.create_entities(entities=[{"name": "sales-2026", "entityType": "report",
    "observations": ["summary in summary.txt"]}])
print(summary)
"""


async def _call_direct(
    spec: dict[str, Any], tool: str, arguments: dict[str, Any], quiet: TextIO
) -> str:
    """What a direct call puts into the model's context: its result's text."""
    params = StdioServerParameters(
        command=spec["command"], args=spec.get("args", []),
        env={**os.environ, **spec.get("env", {})},
    )  # fmt: skip
    with anyio.fail_after(120):
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(tool, arguments)
    return "".join(c.text for c in result.content if c.type == "text")


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _first_sentence(description: str) -> str:
    """The one line a deferring client shows: up to the first sentence end or line break."""
    line = description.strip().split("\n", 1)[0]
    return re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]


async def _run_python(env: dict[str, str], code: str, quiet: TextIO) -> str:
    """The text a ``run_python`` call through the real bridge puts into the model's context."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_code_execution_mode"], env={**os.environ, **env}
    )
    with anyio.fail_after(300):
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("run_python", {"code": code})
    if result.is_error:
        sys.exit(f"run_python failed: {result.content}")
    return "".join(c.text for c in result.content if c.type == "text")


async def main(quiet: TextIO, used: list[tuple[str, str]]) -> None:
    tokenizer = sync_get_tokenizer()

    def count(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    paths = _server_paths()
    with tempfile.TemporaryDirectory(prefix="token-overhead-") as tmp:
        work = Path(tmp)
        servers = _servers(paths, work)
        print(f"{'server':<14}{'tools':>6}{'bytes':>9}{'tokens':>9}")
        total_tokens = total_bytes = total_tools = 0
        listed: dict[str, list[dict[str, Any]]] = {}
        for name, spec in servers.items():
            text = await _tools_json(
                spec["command"], spec.get("args", []), spec.get("env", {}), quiet
            )
            listed[name] = json.loads(text)
            tools, tokens = len(listed[name]), count(text)
            total_tools, total_bytes, total_tokens = (
                total_tools + tools,
                total_bytes + len(text),
                total_tokens + tokens,
            )
            print(f"{name:<14}{tools:>6}{len(text):>9}{tokens:>9}")
        print(f"{'all five':<14}{total_tools:>6}{total_bytes:>9}{total_tokens:>9}")

        config = work / "servers.json"
        config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        bridge_env = {
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_STATE_DIR": str(work / "state"),
        }
        measured = {}
        for mode in ("code", "direct", "both"):
            text = await _tools_json(
                sys.executable, ["-m", "mcp_code_execution_mode", "--tools", mode], bridge_env,
                quiet,
            )  # fmt: skip
            measured[mode] = count(text)
            label = f"bridge {mode}"
            print(f"{label:<14}{len(json.loads(text)):>6}{len(text):>9}{measured[mode]:>9}")
        tokens = measured["code"]
        print(
            f"bridge / five servers: {tokens / total_tokens:.1%} of the tokens "
            f"({total_tokens - tokens} fewer per request)"
        )
        # More tools than the five list to this script: server-everything adds tools for a
        # client that declares sampling, elicitation and roots, which the bridge (relaying them)
        # does; and each direct tool gets a server__tool name and a title naming its server.
        direct = measured["direct"] / total_tokens
        print(f"bridge direct / five servers: {direct:.1%} of the tokens")

        definitions = {(s, t["name"]): t for s, tools in listed.items() for t in tools}
        unknown = [f"{s}.{t}" for s, t in used if (s, t) not in definitions]
        if unknown:
            sys.exit(f"--used: no such tool: {', '.join(unknown)}")
        index = [
            {"name": t["name"], "description": _first_sentence(t.get("description", ""))}
            for tools in listed.values()
            for t in tools
        ]
        deferred_up_front = count(_compact(index))
        deferred_loaded = sum(count(_compact(definitions[key])) for key in used)
        code = "import json\nfrom mcp import runtime\n" + "".join(
            f"print(json.dumps(await runtime.query_tool_docs({s!r}, {t!r}, detail='full'), "
            "separators=(',', ':')))\n"
            for s, t in used
        )
        bridge_loaded = count(await _run_python(bridge_env, code, quiet))
        names = ", ".join(f"{s}.{t}" for s, t in used)
        print()
        print(f"task: {len(used)} of the {total_tools} tools used: {names}")
        print(
            "deferred: each tool's name and first sentence up front, a used tool's full "
            "definition once (the client's own search tool not counted)"
        )
        print(
            "bridge: run_python up front, each used tool's query_tool_docs(detail='full') "
            "as run_python returned it"
        )
        columns = ("all up front", "deferred", "bridge")
        print(f"{'':<26}" + "".join(f"{c:>14}" for c in columns))
        up_front = (total_tokens, deferred_up_front, tokens)
        loaded = (0, deferred_loaded, bridge_loaded)
        task = tuple(a + b for a, b in zip(up_front, loaded, strict=True))
        rows = {"up front (every request)": up_front, "used tools' definitions": loaded}
        for label, row in {**rows, "task total": task}.items():
            print(f"{label:<26}" + "".join(f"{v:>14,}" for v in row))
        full, deferred, bridge = task
        saved = deferred - bridge
        verb = "saves" if saved >= 0 else "costs"
        print(
            f"bridge / deferred: {tokens / deferred_up_front:.1%} up front, "
            f"{bridge / deferred:.1%} for the task (the bridge {verb} {abs(saved):,} tokens); "
            f"deferred / all up front: {deferred / full:.1%} for the task"
        )
        if used == _used(TASK):
            await _csv_task(servers, work, bridge_env, count, task, quiet)


async def _csv_task(
    servers: dict[str, dict[str, Any]],
    work: Path,
    bridge_env: dict[str, str],
    count: Any,
    definitions: tuple[int, int, int],
    quiet: TextIO,
) -> None:
    """The default task end to end, data included: a client calling the tools itself reads the
    whole CSV into the context and writes the summary and the note as call arguments; through
    the bridge the model writes the code and reads what it prints."""
    data = work / "data"
    csv_text = _sales_csv()
    (data / "sales.csv").write_text(csv_text, encoding="utf-8")
    summary = _summary(csv_text)
    read = await _call_direct(
        servers["filesystem"], "read_text_file", {"path": str(data / "sales.csv")}, quiet
    )
    calls = [
        {"name": "read_text_file", "arguments": {"path": str(data / "sales.csv")}},
        {"name": "write_file",
         "arguments": {"path": str(data / "summary.txt"), "content": summary}},
        {"name": "create_entities", "arguments": {"entities": [{
            "name": "sales-2026", "entityType": "report",
            "observations": ["summary in summary.txt"]}]}},
    ]  # fmt: skip
    direct_data = count(read) + sum(count(_compact(call)) for call in calls)
    code = BRIDGE_TASK_CODE.replace("{DATA}", str(data))
    # A client that calls write_file itself is not asked either: no approval question counted.
    (work / "bridge.toml").write_text('[approval]\nmode = "off"\n', encoding="utf-8")
    printed = await _run_python(bridge_env, code, quiet)
    bridge_data = count(_compact({"code": code})) + count(printed)
    full, deferred, bridge = definitions
    print()
    print(
        f"the same task end to end ({CSV_ROWS}-row CSV, {len(csv_text):,} bytes): the tool "
        "calls' arguments and results a client puts into the context, or the bridge's code "
        "and what it printed, added to the definitions above"
    )
    columns = ("all up front", "deferred", "bridge")
    print(f"{'':<26}" + "".join(f"{c:>14}" for c in columns))
    rows = {
        "definitions (above)": (full, deferred, bridge),
        "data and calls": (direct_data, direct_data, bridge_data),
        "task end to end": (full + direct_data, deferred + direct_data, bridge + bridge_data),
    }
    for label, row in rows.items():
        print(f"{label:<26}" + "".join(f"{v:>14,}" for v in row))
    share = (bridge + bridge_data) / (deferred + direct_data)
    print(f"bridge / deferred, end to end: {share:.1%}")


def _used(value: str) -> list[tuple[str, str]]:
    pairs = []
    for item in value.split(","):
        server, dot, tool = item.strip().partition(".")
        if not (server and dot and tool):
            raise argparse.ArgumentTypeError(f"{item!r} is not server.tool")
        pairs.append((server, tool))
    return pairs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--used",
        type=_used,
        default=_used(TASK),
        metavar="SERVER.TOOL,...",
        help=f"the tools the task uses (default: {TASK})",
    )
    args = parser.parse_args()
    # The servers' stderr banners would interleave with the table.
    with open(os.devnull, "w") as devnull:
        anyio.run(main, devnull, args.used)
