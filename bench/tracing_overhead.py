"""What traces cost: imports at start, and the cost on the calling task of one execution span
with two nested call spans, with tracing off (no endpoint) and on (the real SDK provider, batch
processor and OTLP/HTTP exporter, the export itself left to the end: the calling task's share).

Prints figures; asserts nothing. ``--rounds N`` (default 5) import measures, ``--spans N``
(default 600, so that the 1,800 spans fit the default queue of 2,048) executions per measure.

    hatch run tests:python bench/tracing_overhead.py
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

SERVER_IMPORTS = (
    "import mcp_code_execution_mode.cli, mcp_code_execution_mode._compose, "
    "mcp_code_execution_mode.serve"
)
EXPORT_IMPORTS = (
    "import opentelemetry.sdk.trace, opentelemetry.sdk.trace.export, opentelemetry.sdk.resources, "
    "opentelemetry.exporter.otlp.proto.http.trace_exporter"
)


def _python(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.strip()


def _seconds(code: str) -> float:
    timed = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    return float(_python(timed))


def imports(rounds: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    loaded = _python(
        f"{SERVER_IMPORTS}; import sys, threading; "
        "from mcp_code_execution_mode._telemetry import trace_export_from_env; "
        "print(trace_export_from_env(), sorted({m.split('.')[1] for m in sys.modules "
        "if m.startswith('opentelemetry.')}), threading.active_count())",
        env,
    )
    print(f"no endpoint: export={loaded}  (trace export, opentelemetry subpackages, threads)")
    server = [_seconds(SERVER_IMPORTS) for _ in range(rounds)]
    api = [_seconds("import opentelemetry.trace, opentelemetry.propagate") for _ in range(rounds)]
    after_mcp = f"import mcp; t = time.perf_counter(); {EXPORT_IMPORTS}"
    export = [_seconds(after_mcp) for _ in range(rounds)]
    print(f"server modules import:              median {statistics.median(server) * 1e3:8.1f} ms")
    print(f"opentelemetry API alone (mcp has it): median {statistics.median(api) * 1e3:6.1f} ms")
    print(f"SDK + OTLP/HTTP exporter after mcp: median {statistics.median(export) * 1e3:8.1f} ms"
          "  (paid only with an endpoint)")  # fmt: skip


def spans(count: int) -> None:
    import anyio
    from bridge_core import tracing
    from bridge_protocol import Call, Reply

    per_run = max(1, count // 4)  # a warm-up and three measures
    call = Call(1, "exec", "probe", "echo", {"text": "x"})
    reply = Reply(1, value={"content": []})

    async def execution() -> None:
        parent = tracing.current_execution()
        for _ in range(2):
            span = tracing.nested_call(parent, call, 100)
            span.replied(reply, 100)
            span.end()

    async def run() -> float:
        started = time.perf_counter()
        for _ in range(per_run):
            await tracing.traced_execution(execution(), session="bench")
        return (time.perf_counter() - started) / per_run

    anyio.run(run)  # warm-up
    off = min(anyio.run(run) for _ in range(3))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    os.environ["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    # The export runs at the end, not while the calling task is measured.
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "600000"
    os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "2048"
    from mcp_code_execution_mode import _telemetry

    async def on() -> float:
        export = _telemetry.trace_export_from_env()
        async with _telemetry.exporting_traces(export):
            await run()  # warm-up
            return min([await run() for _ in range(3)])

    enabled = anyio.run(on)
    print(f"1 execution + 2 nested calls, tracing off: {off * 1e6:8.1f} µs")
    print(f"1 execution + 2 nested calls, tracing on:  {enabled * 1e6:8.1f} µs "
          f"(+{(enabled - off) * 1e6:.1f} µs for 3 spans)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spans", type=int, default=600)
    args = parser.parse_args()
    imports(args.rounds)
    spans(args.spans)


if __name__ == "__main__":
    main()
