"""A hostile MCP server: plain JSON-RPC lines on stdio, stdlib only (starts in milliseconds).

It speaks just enough MCP (``initialize``, ``tools/list``, ``tools/call``, ``ping``) to be
started by the bridge, then misbehaves on purpose. Run as
``python hostile_server.py [--tools N] [--page-size N]``. Tools:

- ``flood(size)``: writes the start of an answer and then ``size`` bytes of ``x`` with no newline,
  and never finishes it (one JSON-RPC "line" of unbounded length); the process then waits.
- ``spawn_daemon()``: starts a daemon the classic way (fork, ``setsid``, fork again, the middle
  process exits), so the daemon is in its own session and no longer the server's child; answers
  ``{"daemon": pid, "server": pid, "server_parent": ppid}``.
- ``exit(status)``: exits mid-call with ``status`` (after the daemon above, "a server that starts
  a helper in a new session and exits").
- ``whoami()``: ``{"server": pid, "server_parent": ppid}``.
- ``echo(text)``.
- ``answer(result)``: answers with ``result`` itself as the JSON-RPC result, whatever it is (a
  malformed ``CallToolResult``).
- ``big(size)``: a well-formed text result of ``size`` bytes of ``y`` (one complete line).
- ``request()``: the request as the server got it (its ``id`` and ``params._meta``), as JSON text.
- ``script(lines)``: writes each of ``lines`` as a line of its own, with ``@ID@`` replaced by the
  request's id as JSON, and nothing else (the script writes the answer, or several, or none).
- ``stall(seconds)``: stops reading stdin for ``seconds`` (its pipe fills up), then answers.
- ``received()``: every message read so far (``method``, ``id``, the tool's ``name`` or the
  cancelled ``requestId``), as JSON text.

``--tools N`` lists N generated tools besides these (``--page-size``: tools per ``tools/list``
page; one page by default, whatever its size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

OUT = sys.stdout.buffer
DAEMON_SECONDS = 600


def _send(message: dict[str, Any]) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def _text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def _tool(name: str, description: str, **props: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in props.items()},
        },
    }


BUILTIN = [
    _tool("flood", "Write an endless JSON-RPC line.", size="integer"),
    _tool("spawn_daemon", "Start a daemon in a new session; returns its pid."),
    _tool("exit", "Exit mid-call with a status.", status="integer"),
    _tool("whoami", "Report this server's pid and its parent's."),
    _tool("echo", "Echo the given text back.", text="string"),
    _tool("answer", "Answer with the given value as the result itself.", result="object"),
    _tool("big", "A text result of the given size.", size="integer"),
    _tool("request", "The request's id and _meta as JSON text."),
    _tool("script", "Write the given lines, @ID@ replaced by the request id.", lines="array"),
    _tool("stall", "Stop reading stdin for a while, then answer.", seconds="number"),
    _tool("received", "Every message read so far, as JSON text."),
]
RECEIVED: list[dict[str, Any]] = []
"""What the server has read (``received()``), in order."""


def _generated(count: int) -> list[dict[str, Any]]:
    return [
        _tool(f"generated_{i:06d}", f"Generated tool number {i} of a huge catalog.", value="string")
        for i in range(count)
    ]


def _spawn_daemon() -> int:
    """Double fork with setsid in between; returns the daemon's pid (read from a pipe)."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        second = os.fork()
        if second == 0:
            os.close(read_end)
            os.write(write_end, str(os.getpid()).encode())
            os.close(write_end)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            time.sleep(DAEMON_SECONDS)
            os._exit(0)
        os._exit(0)  # the middle process: the daemon is orphaned
    os.close(write_end)
    os.waitpid(first, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return int(pipe.read())


def _flood(request_id: Any, size: int) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1]
    OUT.write(head.encode() + b', "result": {"content": [{"type": "text", "text": "')
    chunk = b"x" * (1024 * 1024)
    written = 0
    try:
        while written < size:
            OUT.write(chunk[: size - written])
            written += min(len(chunk), size - written)
        OUT.flush()
    except BrokenPipeError:
        os._exit(1)
    time.sleep(DAEMON_SECONDS)  # never finishes the line


def _call(request_id: Any, params: dict[str, Any]) -> dict[str, Any] | None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "flood":
        _flood(request_id, int(args.get("size", 120 * 1024 * 1024)))
        return None
    if name == "spawn_daemon":
        daemon = _spawn_daemon()
        info = {"daemon": daemon, "server": os.getpid(), "server_parent": os.getppid()}
        return _text(json.dumps(info))
    if name == "whoami":
        return _text(json.dumps({"server": os.getpid(), "server_parent": os.getppid()}))
    if name == "exit":
        os._exit(int(args.get("status", 0)))
    if name == "echo":
        return _text(str(args.get("text", "")))
    if name == "answer":
        _send({"jsonrpc": "2.0", "id": request_id, "result": args.get("result")})
        return None
    if name == "big":
        return _text("y" * int(args.get("size", 0)))
    if name == "request":
        return _text(json.dumps({"id": request_id, "meta": params.get("_meta")}))
    if name == "script":
        for line in args.get("lines", []):
            OUT.write(str(line).replace("@ID@", json.dumps(request_id)).encode() + b"\n")
        OUT.flush()
        return None
    if name == "stall":
        time.sleep(float(args.get("seconds", 1)))
        return _text("stalled")
    if name == "received":
        return _text(json.dumps(RECEIVED))
    return _text(f"{name} ran")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=0, help="extra generated tools")
    parser.add_argument("--page-size", type=int, default=0, help="tools per page (0: all)")
    opts = parser.parse_args()
    tools = BUILTIN + _generated(opts.tools)
    page = opts.page_size or len(tools)
    for raw in sys.stdin.buffer:
        try:
            request = json.loads(raw)
        except ValueError:
            continue
        method, request_id = request.get("method"), request.get("id")
        params = request.get("params") or {}
        RECEIVED.append(
            {
                "method": method,
                "id": request_id,
                "name": params.get("name"),
                "requestId": params.get("requestId"),
            }
        )
        if request_id is None:
            continue  # a notification
        result: dict[str, Any] | None
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1.0.0"},
            }
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + page
            result = {"tools": tools[start:end]}
            if end < len(tools):
                result["nextCursor"] = str(end)
        elif method == "tools/call":
            result = _call(request_id, params)
            if result is None:
                continue
        elif method == "ping":
            result = {}
        else:
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": f"unknown method {method}"},
                }
            )
            continue
        _send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
