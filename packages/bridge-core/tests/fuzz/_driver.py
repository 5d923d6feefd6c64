"""Fuzz driver for the host side of a sandbox channel: fuzzer bytes in, hostile frames out.

``frames_from(data)`` reads fuzzer bytes as a recipe: each step is a well-formed but hostile
message (wrong or stale execution ids, replies to unknown calls, duplicate call ids, results out
of order, huge outputs, displays with bad mime types, NaN progress, a second hello...), a
message built as a raw CBOR map with wrong field types, a valid frame with some bytes changed,
a lying length prefix, or plain garbage. Both the hypothesis tests (CI) and the coverage-guided
atheris driver (``hatch run fuzz:host``) feed it.

``drive(frames)`` plays them, as the sandbox, into a real :class:`~bridge_core.channel.Channel`
read by a real :class:`~bridge_core.sessions._sandbox.LiveSandbox` with an execution running and
a gateway whose tools answer, fail, raise, return huge values or hang. A healthy sibling sandbox
is served in the same task group; it must still answer a ping after the fuzzed one ended.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import cbor2
from anyio.abc import ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from bridge_core.channel import Channel
from bridge_core.gateway import CallContext, CallFailed
from bridge_core.sessions._output import OutputCollector
from bridge_core.sessions._sandbox import Execution, LiveSandbox
from bridge_protocol import (
    HOST_TO_SANDBOX,
    ErrorCode,
    FrameDecoder,
    Hello,
    Message,
    Ping,
    Pong,
    encode,
)

__all__ = ["MAX_FRAME", "Observed", "drive", "frames_from"]

MAX_FRAME = 1 << 17
"""Frame limit of the fuzzed channel: small, so 'huge' inputs are cheap to make."""
DRIVE_TIMEOUT = 60
"""Bound on one input: generous, the machine may be busy; a hang fails instead of blocking."""
SETTLE_TURNS = 20
EXECUTION = "e-current"
IDS = (EXECUTION, "e-old", "", "e-current ", "x" * 300)
KINDS = ("output", "result", "call", "request", "cancel", "progress", "display", "ping", "pong")
KINDS_ALL = (*KINDS, "hello", "reply", "execute", "welcome", "interrupt", "bogus", "")
STRANGE: tuple[object, ...] = (
    None,
    True,
    -1,
    2**63,
    -(2**64),
    math.nan,
    math.inf,
    "",
    "x" * 70_000,
    b"\xff\x00",
    [],
    {},
    {"a": [1, {"b": None}]},
    cbor2.CBORTag(55799, 1),
)


class Draw:
    """Reads fuzzer bytes as small decisions; past the end every decision is 0."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    @property
    def left(self) -> int:
        return len(self._data) - self._at

    def byte(self) -> int:
        if self._at >= len(self._data):
            return 0
        self._at += 1
        return self._data[self._at - 1]

    def pick(self, options: tuple[Any, ...]) -> Any:
        return options[self.byte() % len(options)]

    def number(self) -> float:
        return self.pick((0.0, 0.5, 1.0, -1.0, math.nan, math.inf, -math.inf, 1e308, 3.0))

    def take(self, count: int) -> bytes:
        chunk = self._data[self._at : self._at + count]
        self._at += len(chunk)
        return chunk


def _valid(draw: Draw) -> dict[str, Any]:
    kind = draw.pick(KINDS)
    xid = draw.pick(IDS)
    call_id = draw.pick((1, 2, 3, 0, 2**40, 2**64, -5))
    size = draw.pick((1, 100, 10_000, 120_000))
    if kind == "output":
        stream = draw.pick(("stdout", "stderr", "stdin"))
        return {"kind": kind, "execution_id": xid, "stream": stream, "text": "y" * size}
    if kind == "result":
        status = draw.pick(("ok", "error", "interrupted", "crashed", "exploded"))
        error = draw.pick((None, {"type": "E", "message": "m", "traceback": "t" * size}, "junk"))
        return {"kind": kind, "execution_id": xid, "status": status, "value": "1", "error": error}
    if kind in ("call", "request"):
        tool = draw.pick(("ok", "fail", "boom", "huge", "hang", "weird"))
        body = {"kind": kind, "call_id": call_id, "execution_id": xid}
        if kind == "call":
            return {**body, "server": draw.pick(("s", "")), "tool": tool, "arguments": {"a": 1}}
        return {**body, "method": tool, "params": draw.pick(({}, {"k": [1, 2.5]}))}
    if kind == "cancel":
        return {"kind": kind, "call_id": call_id}
    if kind == "progress":
        total = draw.pick((None, 1.0, math.nan, 0.0))
        return {"kind": kind, "execution_id": xid, "progress": draw.number(), "total": total}
    if kind == "display":
        mime = draw.pick(("image/png", "", "text/html", "../../etc/passwd", "image/png\n"))
        return {"kind": kind, "execution_id": xid, "mime": mime, "data": b"\x89PNG" * size}
    return {"kind": kind, "nonce": draw.pick((1, 0, 2**64 - 1, 2**64, -1))}


def _raw_map(draw: Draw) -> dict[Any, Any]:
    body: dict[Any, Any] = {"kind": draw.pick(KINDS_ALL)}
    for _ in range(draw.byte() % 5):
        key = draw.pick(("execution_id", "call_id", "text", "stream", "status", "data", 7, b"k"))
        body[key] = draw.pick(STRANGE)
    return body


def _frame(body: object) -> bytes:
    payload = cbor2.dumps(body)
    return struct.pack(">I", len(payload)) + payload


def frames_from(data: bytes) -> list[bytes]:
    """The chunks of bytes a hostile sandbox writes, decided by ``data``."""
    draw = Draw(data)
    chunks: list[bytes] = []
    while draw.left > 0 and len(chunks) < 40:
        step = draw.byte() % 10
        if step < 6:
            chunks.append(_frame(_valid(draw)))
        elif step == 6:
            chunks.append(_frame(_raw_map(draw)))
        elif step == 7:  # a valid frame with a few bytes changed
            frame = bytearray(_frame(_valid(draw)))
            for _ in range(1 + draw.byte() % 3):
                frame[(draw.byte() << 8 | draw.byte()) % len(frame)] = draw.byte()
            chunks.append(bytes(frame))
        elif step == 8:  # a length prefix that lies (too long, too short, above the limit)
            length = draw.pick((0, 1, 5, MAX_FRAME, MAX_FRAME + 1, 2**32 - 1))
            chunks.append(struct.pack(">I", length) + draw.take(draw.byte() % 16))
        else:
            chunks.append(draw.take(1 + draw.byte() % 32))
    return chunks


class MemoryByteStream(ByteStream):
    """One end of an in-memory byte pipe."""

    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send, self._receive, self._rest = send, receive, b""

    async def send(self, item: bytes) -> None:
        await self._send.send(item)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._rest:
            self._rest = await self._receive.receive()
        data, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
        return data

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def _pipe() -> tuple[MemoryByteStream, MemoryByteStream]:
    a_send, b_receive = anyio.create_memory_object_stream[bytes](1024)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](1024)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)


class HostileToolsGateway:
    """Tools named by what they do: ok, fail, boom (a bug), huge, hang, weird (unencodable)."""

    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> Any:
        return await self._answer(tool)

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> Any:
        return await self._answer(method)

    async def _answer(self, name: str) -> Any:
        if name == "fail":
            raise CallFailed(ErrorCode.UNKNOWN_TOOL, "no such tool")
        if name == "boom":
            raise RuntimeError("a bug in the gateway")
        if name == "huge":
            return {"content": [{"type": "text", "text": "z" * (MAX_FRAME + 10)}]}
        if name == "weird":
            return {"content": {1, 2}}
        if name == "hang":
            await anyio.sleep_forever()
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}


@dataclass
class _Named:
    name: str


@dataclass
class Observed:
    """What the host did with the frames."""

    protocol_failure: bool
    reason: str
    output_chars: int
    images: int
    sent_to_sandbox: list[Message] = field(default_factory=list)
    sibling_answered: bool = False


async def _sandbox_side(
    end: MemoryByteStream, inbox: list[Message], pong: anyio.Event | None = None
) -> None:
    decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
    try:
        while True:
            inbox.extend(decoder.feed(await end.receive()))
            if pong is not None and any(isinstance(m, Pong) for m in inbox):
                pong.set()
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


async def _live(tg: anyio.abc.TaskGroup, name: str) -> tuple[LiveSandbox, MemoryByteStream]:
    host, end = _pipe()
    live = LiveSandbox(
        _Named(name),  # type: ignore[arg-type]
        Channel(host, max_frame_size=MAX_FRAME, send_timeout=5),
        HostileToolsGateway(),
        handshake_timeout=5,
    )
    await end.send(encode(Hello(versions=(1,))))
    await tg.start(live.serve)
    return live, end


async def drive(frames: list[bytes]) -> Observed:
    """Play ``frames`` into a served sandbox; return what the host made of them."""
    inbox: list[Message] = []
    sibling_inbox: list[Message] = []
    with anyio.fail_after(DRIVE_TIMEOUT):
        async with anyio.create_task_group() as tg:
            live, end = await _live(tg, "fuzzed")
            sibling, sibling_end = await _live(tg, "sibling")
            tg.start_soon(_sandbox_side, end, inbox)
            pong = anyio.Event()
            tg.start_soon(_sandbox_side, sibling_end, sibling_inbox, pong)
            output = OutputCollector(4096)
            execution = Execution(EXECUTION, output, None)
            await live.start(execution, "print(1)")
            for chunk in frames:
                if not live.alive:
                    break
                try:
                    await end.send(chunk)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
            # Let in-flight calls answer before the end of stream cancels them: the gateway and
            # the pipes never do I/O, so a few turns of the loop are enough (and much faster than
            # wait_all_tasks_blocked, which polls every 0.1 s on asyncio).
            for _ in range(SETTLE_TURNS):
                await anyio.lowlevel.checkpoint()
            await end.send_eof()
            await live.closed.wait()
            await execution.done.wait()
            await sibling_end.send(encode(Ping(nonce=7)))
            await pong.wait()
            sibling.close()
            await sibling.closed.wait()
            await end.aclose()
            await sibling_end.aclose()
            await output.aclose()
    return Observed(
        protocol_failure=live.protocol_failure,
        reason=live.failure_reason,
        output_chars=output.chars,
        images=len(execution.images),
        sent_to_sandbox=inbox,
        sibling_answered=Pong(7) in sibling_inbox,
    )
