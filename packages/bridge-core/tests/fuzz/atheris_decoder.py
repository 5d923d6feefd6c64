"""Coverage-guided fuzzing of ``bridge_protocol.FrameDecoder`` with atheris (libFuzzer).

    hatch run fuzz:decoder            # 1,000,000 inputs; libFuzzer flags may follow

Each input is split into chunks of a size read from its first byte and fed to a decoder that
accepts sandbox-to-host kinds with a 64 KiB frame limit. Any exception other than a
``ProtocolError`` stops the run with the input saved (``crash-*``); libFuzzer's ``-rss_limit_mb``
bounds memory.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import cbor2  # noqa: F401  (instrumented: its Python paths count for coverage)
    from bridge_protocol import SANDBOX_TO_HOST, FrameDecoder, ProtocolError

MAX_FRAME = 1 << 16


def one_input(data: bytes) -> None:
    if not data:
        return
    chunk = 1 + data[0] % 64
    body = data[1:]
    decoder = FrameDecoder(max_frame_size=MAX_FRAME, accept=SANDBOX_TO_HOST)
    try:
        for start in range(0, len(body), chunk):
            decoder.feed(body[start : start + chunk])
            if decoder.buffered > MAX_FRAME + 4:
                raise AssertionError(f"decoder holds {decoder.buffered} bytes")
        decoder.end_of_stream()
    except ProtocolError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
