"""Write the golden vectors of the current protocol version; never overwrite one.

    python packages/bridge-protocol/tests/make_vectors.py [--out DIR]

Each vector is ``<name>.cbor`` (the exact frame bytes: length prefix + CBOR map) and ``<name>.py``
(``MESSAGE = <the decoded message>``, plus ``ENCODER_OUTPUT``: whether today's encoder produces
exactly these bytes; hand-built frames, e.g. with optional fields left out, say False).

Committed vectors are never edited. If the encoder's output for an existing vector changed, this
script writes nothing for it and exits 1: a wire change needs a new protocol version (see
``bridge_protocol.versions``) and a new vector directory, while the old vectors keep decoding.
New cases added below are written next to the existing ones.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Mapping
from pathlib import Path

import cbor2
from bridge_protocol import (
    CURRENT_VERSION,
    Call,
    CancelCall,
    Display,
    ErrorCode,
    ErrorInfo,
    Execute,
    Fault,
    Hello,
    Interrupt,
    Message,
    Output,
    Ping,
    Pong,
    Progress,
    Refusal,
    Reply,
    Request,
    Resave,
    Restore,
    Restored,
    Result,
    Shutdown,
    Snapshot,
    SnapshotCopy,
    Welcome,
    encode,
)

VECTORS = Path(__file__).parent / "vectors"

# A 1x1 transparent PNG: what a tiny plot looks like on the wire.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63fcffff3f0300050001ff5ac3a5c80000000049454e44ae426082"
)

CASES: Mapping[str, Message] = {
    "hello": Hello(versions=(1,), client_version="0.1.0"),
    "hello_several_versions": Hello(versions=(1, 2, 3)),
    "welcome": Welcome(version=1, session="default"),
    "refusal": Refusal(
        code=int(ErrorCode.UNSUPPORTED_VERSION),
        message="the sandbox speaks protocol versions [7], the host speaks [1]",
        supported=(1,),
    ),
    "execute": Execute(execution_id="x-1", code="import math\nmath.sqrt(2)\n"),
    "execute_repr_limit": Execute(execution_id="x-2", code="'a' * 100", repr_limit=20),
    "output_stdout": Output(execution_id="x-1", stream="stdout", text="line 1\n\n  indented\n"),
    "output_stderr_unicode": Output(
        execution_id="x-1", stream="stderr", text="héllo → 世界 🐍\r\n"
    ),
    "display_png": Display(execution_id="x-1", mime="image/png", data=_PNG),
    "progress": Progress(execution_id="x-1", progress=3.0, total=10.0, message="step 3"),
    "progress_bare": Progress(execution_id="x-1", progress=0.25),
    "result_ok": Result(execution_id="x-1", status="ok", value="1.4142135623730951"),
    "result_ok_no_value": Result(execution_id="x-1", status="ok"),
    "result_error": Result(
        execution_id="x-1",
        status="error",
        error=ErrorInfo(
            type="ZeroDivisionError",
            message="division by zero",
            traceback='  File "<cell>", line 1, in <module>\nZeroDivisionError: division by zero\n',
        ),
    ),
    "result_interrupted": Result(
        execution_id="x-1",
        status="interrupted",
        error=ErrorInfo(type="KeyboardInterrupt", message=""),
    ),
    "result_timeout": Result(execution_id="x-1", status="timeout"),
    "interrupt": Interrupt(execution_id="x-1"),
    "call": Call(
        call_id=1,
        execution_id="x-1",
        server="filesystem",
        tool="read_file",
        arguments={
            "path": "/data/sales.csv",
            "limits": [0, -1, 2**64 - 1, -(2**64)],
            "ratio": 0.5,
            "flags": {"follow": True, "hidden": False, "encoding": None},
            "raw": b"\x00\xff",
        },
    ),
    "call_no_arguments": Call(call_id=2, execution_id="x-1", server="time", tool="now"),
    "request_search": Request(
        call_id=3,
        execution_id="x-1",
        method="search_tool_docs",
        params={"query": "list files", "limit": 5},
    ),
    "cancel": CancelCall(call_id=3),
    "reply_value": Reply(
        call_id=1,
        value={
            "content": [{"type": "text", "text": "region,total\nnorth,12\n"}],
            "structuredContent": {"rows": 1},
            "isError": False,
        },
    ),
    "reply_fault": Reply(
        call_id=2,
        fault=Fault(
            code=int(ErrorCode.UNKNOWN_TOOL),
            message="unknown tool 'nope' on server 'time'",
            data={"suggestions": ["now", "convert_time"]},
        ),
    ),
    "ping": Ping(nonce=42),
    "pong": Pong(nonce=42),
    "shutdown": Shutdown(reason="session closed"),
    "snapshot_chunk": Snapshot(snapshot_id="s-1", data=b"MCPSNAP1\x00\x01"),
    "snapshot_last": Snapshot(
        snapshot_id="s-1", last=True, unsaved=("handle (TextIOWrapper): cannot pickle",)
    ),
    "snapshot_failed": Snapshot(snapshot_id="s-2", last=True, error="fork failed: EAGAIN"),
    "restore_last": Restore(restore_id="r-1", data=b"MCPSNAP1", last=True),
    "restored": Restored(restore_id="r-1"),
    "restored_error": Restored(restore_id="r-1", error="the saved state is corrupted"),
    "resave": Resave(reason="the last state sent could not be saved"),
    "snapshot_copy": SnapshotCopy(snapshot_id="s-3", base="s-2", offset=4096, length=24_000_000),
}

# Frames built by hand: optional fields left out, as a peer is allowed to send them.
HAND_BUILT: Mapping[str, tuple[dict[str, object], Message]] = {
    "execute_minimal": (
        {"kind": "execute", "execution_id": "x-3", "code": "1 + 1"},
        Execute(execution_id="x-3", code="1 + 1"),
    ),
    "reply_minimal": ({"kind": "reply", "call_id": 9}, Reply(call_id=9)),
    "shutdown_minimal": ({"kind": "shutdown"}, Shutdown()),
    "result_fields_reordered": (
        {"status": "ok", "value": "2", "execution_id": "x-3", "kind": "result"},
        Result(execution_id="x-3", status="ok", value="2"),
    ),
}


def _frame_of(wire: dict[str, object]) -> bytes:
    body = cbor2.dumps(wire)
    return struct.pack(">I", len(body)) + body


def planned_vectors() -> dict[str, tuple[bytes, Message, bool]]:
    """Every vector of the current version: name → (frame bytes, message, encoder output?)."""
    planned = {name: (encode(message), message, True) for name, message in CASES.items()}
    for name, (wire, message) in HAND_BUILT.items():
        planned[name] = (_frame_of(wire), message, False)
    return planned


def _expectation(message: Message, encoder_output: bool) -> str:
    return (
        f"# Golden vector of protocol version {CURRENT_VERSION}. Never edit: see make_vectors.py.\n"
        f"ENCODER_OUTPUT = {encoder_output}\n"
        f"MESSAGE = {message!r}\n"
    )


def write_vectors(directory: Path) -> int:
    """Write missing vectors into ``directory``; return 1 if an existing one no longer matches."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, (frame, message, encoder_output) in planned_vectors().items():
        cbor_path, py_path = directory / f"{name}.cbor", directory / f"{name}.py"
        if cbor_path.exists() or py_path.exists():
            if cbor_path.exists() and cbor_path.read_bytes() != frame:
                changed.append(name)
            print(f"kept    {name}")
            continue
        cbor_path.write_bytes(frame)
        py_path.write_text(_expectation(message, encoder_output), encoding="utf-8")
        print(f"wrote   {name}")
    if changed:
        print(
            f"refusing to overwrite {len(changed)} vector(s) whose bytes changed: "
            f"{', '.join(changed)}.\nA wire change needs a new protocol version and vector "
            "directory; committed vectors are never edited.",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=VECTORS / f"v{CURRENT_VERSION}")
    return write_vectors(parser.parse_args(argv).out)


if __name__ == "__main__":
    sys.exit(main())
