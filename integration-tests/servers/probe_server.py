"""A small MCP server (SDK 2.x low-level API, stdio) with a tool for every hard proxy case.

Run as ``python probe_server.py [--mode MODE] [--tools N] [--page-size N]``. Modes:

- ``normal``: serve MCP on stdio.
- ``junk-stdout``: print non-JSON lines on stdout before serving (a badly behaved server).
- ``no-init``: read stdin forever and never answer ``initialize``.
- ``exit-at-start``: write a line to stderr and exit with ``--exit-code`` before serving.

Tools: ``echo``, ``sleep``, ``rendezvous`` (returns only once N calls are in flight together),
``wait_cancelled`` (returns once N calls were cancelled by the client), ``crash`` (stderr line,
then exit with a status mid-call), ``hang``, ``huge`` (a text result of N bytes),
``spawn_child`` (leaves a child process running), ``env`` (this process's environment, argv and
pid),
``add_tool`` (adds a tool and sends ``notifications/tools/list_changed``), ``fail_is_error`` (an
``isError`` result), ``fail_rpc`` (a JSON-RPC error), plus ``--tools N`` generated
``tool_NNN`` tools.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

Ctx = ServerRequestContext[Any, Any]


def _schema(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in props.items()},
        "required": list(props),
    }


BUILTIN_TOOLS = [
    types.Tool(
        name="echo", description="Echo the given text back.", input_schema=_schema(text="string")
    ),
    types.Tool(
        name="sleep",
        description="Sleep for some seconds; returns start and end timestamps.",
        # `pad` (ignored) makes a call as large as a test needs.
        input_schema={
            **_schema(seconds="number"),
            "properties": {"seconds": {"type": "number"}, "pad": {"type": "string"}},
        },
    ),
    types.Tool(
        name="rendezvous",
        description="Return only once `count` rendezvous calls with this key are in flight.",
        input_schema=_schema(key="string", count="integer"),
    ),
    types.Tool(
        name="wait_cancelled",
        description="Return once at least `count` calls were cancelled by the client.",
        input_schema=_schema(count="integer"),
    ),
    types.Tool(
        name="crash",
        description="Write `message` to stderr and exit with `status` in the middle of the call.",
        input_schema=_schema(status="integer", message="string"),
    ),
    types.Tool(name="hang", description="Never answer.", input_schema=_schema()),
    types.Tool(
        name="huge",
        description="Return a text result of `size` bytes.",
        input_schema=_schema(size="integer"),
    ),
    types.Tool(
        name="env",
        description="Report this server's environment, command line and pid.",
        input_schema=_schema(),
    ),
    types.Tool(
        name="spawn_child",
        description="Start a child process that outlives the call; returns its pid.",
        input_schema=_schema(),
    ),
    types.Tool(
        name="add_tool",
        description="Add a tool named `name` and notify the client that the tool list changed.",
        input_schema=_schema(name="string"),
    ),
    types.Tool(
        name="fail_is_error", description="Answer with an isError result.", input_schema=_schema()
    ),
    types.Tool(
        name="fail_rpc", description="Answer with a JSON-RPC error.", input_schema=_schema()
    ),
]


class ProbeState:
    def __init__(self, generated: int, page_size: int) -> None:
        self.tools = list(BUILTIN_TOOLS) + [
            types.Tool(
                name=f"tool_{i:03d}",
                description=f"Generated tool number {i} for catalogue-size tests.",
                input_schema=_schema(value="string"),
            )
            for i in range(generated)
        ]
        self.page_size = page_size
        self.arrivals: dict[str, int] = {}
        self.arrived = anyio.Event()
        self.cancelled = 0
        self.cancel_seen = anyio.Event()

    def bump_arrivals(self) -> None:
        self.arrived.set()
        self.arrived = anyio.Event()

    def bump_cancelled(self) -> None:
        self.cancelled += 1
        self.cancel_seen.set()
        self.cancel_seen = anyio.Event()


def _text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)], is_error=is_error
    )


def build_server(state: ProbeState) -> Server[Any]:
    async def on_list_tools(
        ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = state.tools[start : start + state.page_size]
        end = start + len(page)
        return types.ListToolsResult(
            tools=page, next_cursor=str(end) if end < len(state.tools) else None
        )

    async def on_call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        try:
            return await _dispatch(ctx, name, args)
        except anyio.get_cancelled_exc_class():
            state.bump_cancelled()
            raise

    async def _dispatch(ctx: Ctx, name: str, args: dict[str, Any]) -> types.CallToolResult:
        if name == "echo":
            return _text(str(args.get("text", "")))
        if name == "sleep":
            started = time.time()
            await anyio.sleep(float(args["seconds"]))
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="slept")],
                structured_content={"started": started, "ended": time.time()},
            )
        if name == "rendezvous":
            key, count = str(args["key"]), int(args["count"])
            state.arrivals[key] = state.arrivals.get(key, 0) + 1
            state.bump_arrivals()
            with anyio.fail_after(10):
                while state.arrivals[key] < count:
                    await state.arrived.wait()
            return _text(f"met {count}")
        if name == "wait_cancelled":
            with anyio.fail_after(10):
                while state.cancelled < int(args["count"]):
                    await state.cancel_seen.wait()
            return _text(str(state.cancelled))
        if name == "crash":
            sys.stderr.write(str(args.get("message", "crashing")) + "\n")
            sys.stderr.flush()
            os._exit(int(args.get("status", 1)))
        if name == "hang":
            await anyio.sleep_forever()
        if name == "huge":
            return _text("x" * int(args["size"]))
        if name == "env":
            info = {"pid": os.getpid(), "env": dict(os.environ), "argv": sys.argv}
            return _text(json.dumps(info))
        if name == "add_tool":
            state.tools.append(
                types.Tool(
                    name=str(args["name"]), description="Added at run time.", input_schema=_schema()
                )
            )
            await ctx.session.send_tool_list_changed()
            return _text("added")
        if name == "spawn_child":
            # Deliberately unmanaged: the child must outlive this call (an orphan-prone server).
            child = subprocess.Popen(  # noqa: ASYNC220
                [sys.executable, "-c", "import time; time.sleep(300)"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
            return _text(str(child.pid))
        if name == "fail_is_error":
            return _text("the tool failed on purpose", is_error=True)
        if name == "fail_rpc":
            raise MCPError(code=-32603, message="the tool raised on purpose")
        if name.startswith("tool_") and any(t.name == name for t in state.tools):
            return _text(f"{name}:{args.get('value', '')}")
        if any(t.name == name for t in state.tools):
            return _text(f"{name} ran")
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")

    return Server("probe", version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def serve(state: ProbeState) -> None:
    server = build_server(state)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--mode", default="normal", choices=["normal", "junk-stdout", "no-init", "exit-at-start"]
    )
    parser.add_argument("--tools", type=int, default=0, help="extra generated tools")
    parser.add_argument("--page-size", type=int, default=1000, help="tools per tools/list page")
    parser.add_argument("--exit-code", type=int, default=3)
    # Other arguments are accepted and ignored: tests pass secrets on the command line, as users
    # pass tokens to real servers, and read them back with the ``env`` tool.
    opts, _ = parser.parse_known_args()
    if opts.mode == "exit-at-start":
        sys.stderr.write(f"probe: refusing to start (exit {opts.exit_code})\n")
        sys.exit(opts.exit_code)
    if opts.mode == "no-init":
        for _line in sys.stdin:  # consume requests, answer none
            pass
        return
    if opts.mode == "junk-stdout":
        sys.stdout.write("probe server starting...\nnot json {\n")
        sys.stdout.flush()
    anyio.run(serve, ProbeState(opts.tools, opts.page_size))


if __name__ == "__main__":
    main()
