"""Encode + decode throughput of the wire protocol for small, medium and large frames.

    hatch run bench:protocol [--seconds 1.0]

For each frame size it encodes a message, feeds the frame to a decoder (one chunk, as a large
socket read would deliver it) and checks the message came back, repeating for about ``--seconds``.
Prints frames/s and MB/s (frame bytes, prefix included) for encode, decode and the round trip.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import cbor2
from bridge_protocol import Display, FrameDecoder, Message, Output, Reply, encode


@dataclass(frozen=True)
class Case:
    name: str
    message: Message


def cases() -> list[Case]:
    line = "2024-06-01 12:00:00 INFO processed batch 17 of 40 (rows=1000, errors=0)\n"
    rows = [
        {"id": i, "name": f"item {i}", "price": i * 0.25, "tags": ["a", "b"]} for i in range(1300)
    ]
    return [
        Case("output ~100 B", Output(execution_id="x-1", stream="stdout", text=line)),
        Case("reply 64 KB JSON", Reply(call_id=7, value={"rows": rows})),
        Case("display 64 KB", Display("x-1", "image/png", bytes(range(256)) * 256)),
        Case("display 4 MB", Display("x-1", "image/png", bytes(range(256)) * 16384)),
    ]


def measure(action: Callable[[], object], seconds: float) -> float:
    """Seconds per call of ``action``: the best of 3 batches sized to take ``seconds`` in all."""
    start = time.perf_counter()
    action()
    once = max(time.perf_counter() - start, 1e-7)
    batch = max(1, int(seconds / 3 / once))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(batch):
            action()
        best = min(best, (time.perf_counter() - start) / batch)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()

    print(f"python {platform.python_version()}, cbor2 {_cbor2_version()}, {platform.machine()}")
    header = f"{'frame':<18}{'bytes':>10}  {'step':<11}{'frames/s':>12}{'MB/s':>10}{'µs/frame':>11}"
    print(header)
    print("-" * len(header))
    for case in cases():
        frame = encode(case.message)

        def encode_only(message: Message = case.message) -> None:
            encode(message)

        def decode(frame: bytes = frame, expected: Message = case.message) -> None:
            (message,) = FrameDecoder().feed(frame)
            assert message == expected

        def round_trip(message: Message = case.message) -> None:
            (back,) = FrameDecoder().feed(encode(message))
            assert back == message

        steps: list[tuple[str, Callable[[], object]]] = [
            ("encode", encode_only),
            ("decode", decode),
            ("round trip", round_trip),
        ]
        for step, action in steps:
            per_frame = measure(action, args.seconds)
            print(
                f"{case.name:<18}{len(frame):>10}  {step:<11}{1 / per_frame:>12,.0f}"
                f"{len(frame) / per_frame / 1e6:>10,.1f}{per_frame * 1e6:>11,.1f}"
            )


def _cbor2_version() -> str:
    from importlib.metadata import version

    return version(cbor2.__name__)


if __name__ == "__main__":
    main()
