"""Figures for the sandbox client, run on the host against a minimal in-process host.

    python packages/bridge-sandbox-client/bench/client_bench.py

Prints: start-up to Hello, execute round trip, tool call round trips (sync twin, await, and
gather), and output throughput. No container: this measures the client itself.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from bridge_protocol import (
    SANDBOX_TO_HOST,
    Call,
    Execute,
    FrameDecoder,
    Message,
    Output,
    Reply,
    Request,
    Result,
    Shutdown,
    Welcome,
    encode,
)


class BenchHost:
    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="bsc-bench-")
        self.path = os.path.join(self.directory, "channel.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(1)
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bridge_sandbox_client", "--socket", self.path]
        )
        self.sock, _ = listener.accept()
        listener.close()
        self.decoder = FrameDecoder(accept=SANDBOX_TO_HOST)
        self.pending: list[Message] = []
        self.next()  # Hello
        self.startup = time.perf_counter() - started
        self.sock.sendall(encode(Welcome(version=1)))
        self.lock = threading.Lock()
        self.ids = 0

    def next(self) -> Message:
        while not self.pending:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("client went away")
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    def execute(self, code: str) -> tuple[Result, int]:
        self.ids += 1
        eid = f"b{self.ids}"
        self.sock.sendall(encode(Execute(execution_id=eid, code=code)))
        outputs = 0
        while True:
            message = self.next()
            if isinstance(message, Call):
                value: Any = {"content": [], "structuredContent": {"ok": True}}
                self.sock.sendall(encode(Reply(call_id=message.call_id, value=value)))
            elif isinstance(message, Request):
                answer: Any = ["bench"] if message.method == "discovered_servers" else ["echo"]
                self.sock.sendall(encode(Reply(call_id=message.call_id, value=answer)))
            elif isinstance(message, Output):
                outputs += 1
            elif isinstance(message, Result) and message.execution_id == eid:
                return message, outputs

    def close(self) -> None:
        self.sock.sendall(encode(Shutdown()))
        self.process.wait(timeout=30)
        self.sock.close()


def timed(host: BenchHost, code: str) -> tuple[float, int]:
    started = time.perf_counter()
    result, outputs = host.execute(code)
    assert result.status == "ok", result.error
    return time.perf_counter() - started, outputs


def main() -> None:
    host = BenchHost()
    print(f"start-up to Hello:              {host.startup * 1000:8.1f} ms")
    host.execute("mcp_servers['bench'].echo.sync()")  # warm the tool-name cache
    samples = [timed(host, "1")[0] for _ in range(300)]
    print(f"execute round trip (p50):       {statistics.median(samples) * 1e6:8.0f} µs")
    n = 2000
    elapsed, _ = timed(host, f"for _ in range({n}):\n    mcp_servers['bench'].echo.sync()")
    print(f"tool call, sync twin:           {elapsed / n * 1e6:8.0f} µs per call")
    elapsed, _ = timed(host, f"for _ in range({n}):\n    await mcp_servers['bench'].echo()")
    print(f"tool call, await:               {elapsed / n * 1e6:8.0f} µs per call")
    elapsed, _ = timed(
        host,
        f"import asyncio\nawait asyncio.gather(*(mcp_servers['bench'].echo() for _ in range({n})))",
    )
    print(f"tool calls, gather of {n}:      {elapsed * 1000:8.1f} ms total")
    elapsed, frames = timed(host, "for i in range(200_000):\n    print(i)")
    print(f"200k prints (1.3 MB):           {elapsed * 1000:8.1f} ms in {frames} output frames")
    elapsed, frames = timed(host, "import os\nos.write(1, b'x' * 50_000_000)")
    print(f"50 MB in one os.write:          {elapsed * 1000:8.1f} ms in {frames} output frames")
    host.close()


if __name__ == "__main__":
    main()
