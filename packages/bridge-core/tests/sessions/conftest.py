"""An in-process fake runtime whose sandboxes speak the real protocol over an in-memory stream.

Each fake sandbox runs a tiny scripted interpreter: the code of an ``Execute`` is a list of
lines, one command each (``print:hello``, ``set:a=1``, ``sleep:5``, ``stubborn:5``, ``crash:139``,
``oom``, ``call:server.tool``, ``flood:N:SIZE``, ``garbage`` ...; see ``FakeSandbox._command``).
The manager cannot tell it from a real sandbox: the bytes are real frames of ``bridge_protocol``.
"""

from __future__ import annotations

import ast
import math
import shutil
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ByteStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.gateway import CallContext, CallFailed
from bridge_core.runtime.base import RuntimeInfo, Sandbox, SandboxExit, SandboxSpec, SharedDir
from bridge_core.sessions import SessionConfig, SessionManager, SessionStore, StoreSettings
from bridge_core.sessions._durable import DurableLink
from bridge_core.sessions._state_files import block_size, disk_cost
from bridge_protocol import (
    HOST_TO_SANDBOX,
    Call,
    CancelCall,
    Display,
    ErrorCode,
    ErrorInfo,
    Execute,
    FrameDecoder,
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
    Result,
    Shutdown,
    Snapshot,
    Welcome,
    encode,
)


class MemoryByteStream(ByteStream):
    """One end of an in-memory, bounded byte pipe (like a socketpair, without the kernel)."""

    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send = send
        self._receive = receive
        self._rest = b""

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


def byte_stream_pair() -> tuple[MemoryByteStream, MemoryByteStream]:
    a_send, b_receive = anyio.create_memory_object_stream[bytes](64)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](64)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)


class SandboxGone(Exception):
    """Raised inside the fake sandbox to end it (crash, OOM, kill)."""


@dataclass(eq=False)
class FakeSandbox:
    """A fake container: the host end of the channel, plus what the fake interpreter did."""

    name: str
    stream: MemoryByteStream
    runtime: FakeRuntime
    exit: SandboxExit | None = None
    namespace: dict[str, str] = field(default_factory=dict)
    shared_dir: SharedDir | None = None
    """Like a container's channel directory: the host writes, the sandbox reads at ``inside``."""
    received: list[Message] = field(default_factory=list)
    welcome: Welcome | None = None
    interrupted: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    finished: anyio.Event = field(default_factory=anyio.Event)
    _shielded: set[anyio.CancelScope] = field(default_factory=set)
    _end: MemoryByteStream | None = None
    _current: tuple[str, anyio.CancelScope] | None = None
    _replies: dict[int, tuple[anyio.Event, list[Reply]]] = field(default_factory=dict)
    _next_call: int = 0

    # --- lifecycle -----------------------------------------------------------------------------

    async def run(self, end: MemoryByteStream) -> None:
        self._end = end
        with self.scope:
            try:
                if self.runtime.hello_gate is not None:
                    await self.runtime.hello_gate.wait()
                await self._send(Hello(versions=self.runtime.hello_versions))
                async with anyio.create_task_group() as tg:
                    await self._serve(tg)
            except* (
                SandboxGone,
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
            ):
                pass
        if self.exit is None:
            self.exit = SandboxExit(running=False, exit_code=0)
        with anyio.CancelScope(shield=True):
            await end.aclose()
        self.finished.set()

    def end(self, exit_state: SandboxExit) -> None:
        if self.exit is None:
            self.exit = exit_state
        self.scope.cancel()
        for scope in self._shielded:  # a killed process stops even where signals cannot reach
            scope.cancel()

    async def _send(self, message: Message) -> None:
        assert self._end is not None
        await self._end.send(encode(message))

    async def _serve(self, tg: TaskGroup) -> None:
        assert self._end is not None
        decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
        while True:
            data = await self._end.receive()
            for message in decoder.feed(data):
                self.received.append(message)
                if isinstance(message, Welcome):
                    self.welcome = message
                elif isinstance(message, Refusal):
                    raise SandboxGone
                elif isinstance(message, Execute):
                    tg.start_soon(self._execute, message)
                elif isinstance(message, Interrupt):
                    self.interrupted.set()
                    if self._current and self._current[0] == message.execution_id:
                        self._current[1].cancel()
                elif isinstance(message, Reply):
                    if message.call_id in self._replies:
                        event, box = self._replies[message.call_id]
                        box.append(message)
                        event.set()
                elif isinstance(message, Ping):
                    await self._send(Pong(message.nonce))
                elif isinstance(message, Shutdown):
                    raise SandboxGone

    # --- the scripted interpreter --------------------------------------------------------------

    async def _execute(self, message: Execute) -> None:
        self.runtime.executions.append(message.code)
        scope = anyio.CancelScope()
        self._current = (message.execution_id, scope)
        result: Result | None = None
        with scope:
            try:
                for line in message.code.splitlines():
                    result = await self._command(message.execution_id, line)
                    if result is not None:
                        break
            except SandboxGone:
                self.scope.cancel()
                raise
        if scope.cancelled_caught:
            for call_id in list(self._replies):
                await self._send(CancelCall(call_id))
            info = ErrorInfo("KeyboardInterrupt", "", "Traceback: KeyboardInterrupt")
            result = Result(message.execution_id, "interrupted", error=info)
        self._current = None
        await self._send(result or Result(message.execution_id, "ok"))

    async def _out(self, execution_id: str, text: str, stream: str = "stdout") -> None:
        await self._send(Output(execution_id, stream, text))  # type: ignore[arg-type]

    async def _command(self, xid: str, line: str) -> Result | None:
        verb, _, arg = line.partition(":")
        rt = self.runtime
        if verb == "print":
            await self._out(xid, arg + "\n")
        elif verb == "raw":
            await self._out(xid, ast.literal_eval(arg))
        elif verb == "stale":  # a late frame of some earlier execution
            await self._out("an-old-execution", arg + "\n")
        elif verb == "err":
            await self._out(xid, arg + "\n", "stderr")
        elif verb == "set":
            key, _, value = arg.partition("=")
            self.namespace[key] = value
        elif verb == "get":
            await self._out(xid, self.namespace.get(arg, "<unset>") + "\n")
        elif verb == "sleep":
            await anyio.sleep(float(arg))
        elif verb == "stubborn":  # like a C-level sleep: KeyboardInterrupt cannot reach it
            with anyio.CancelScope(shield=True) as shielded:
                self._shielded.add(shielded)
                await rt.release(arg).wait()
        elif verb == "hold":
            rt.holding(arg).set()
            await rt.release(arg).wait()
        elif verb == "meet":
            key, _, count = arg.partition("/")
            await rt.meet(key, int(count))
        elif verb == "flood":
            count, _, size = arg.partition("x")
            chunk = "y" * (int(size) - 1) + "\n"
            for _ in range(int(count)):
                await self._out(xid, chunk)
        elif verb == "crash":
            self.end(SandboxExit(running=False, exit_code=int(arg)))
            raise SandboxGone
        elif verb == "oom":
            self.end(SandboxExit(running=False, exit_code=137, oom_killed=True))
            raise SandboxGone
        elif verb == "garbage":
            assert self._end is not None
            await self._end.send(b"\x00\x00\x00\x03abc")
        elif verb in ("call", "request"):
            await self._call(xid, verb, arg)
        elif verb == "fan":  # fan:N:K:server.tool:SIZE - N calls at once, wait for K replies
            count, expect, target, size = arg.split(":")
            await self._fan(xid, int(count), int(expect), target, int(size))
        elif verb == "progress":
            done, _, total = arg.partition("/")
            await self._send(Progress(xid, float(done), float(total), "working"))
        elif verb == "display":
            await self._send(Display(xid, "image/png", b"\x89PNG" + arg.encode()))
        elif verb == "size":  # of a file the host shared, by its path inside the sandbox
            await self._out(xid, f"{len(self.read_shared(arg))}\n")
        elif verb == "raise":
            kind, _, text = arg.partition("=")
            return Result(xid, "error", error=ErrorInfo(kind, text, f"{kind}: {text}"))
        elif verb == "value":
            return Result(xid, "ok", value=arg)
        return None

    async def _call(self, xid: str, verb: str, arg: str) -> None:
        self._next_call += 1
        call_id = self._next_call
        event, box = anyio.Event(), list[Reply]()
        self._replies[call_id] = (event, box)
        if verb == "call":
            server, _, tool = arg.partition(".")
            await self._send(Call(call_id, xid, server, tool, {"x": 1}))
        else:
            await self._send(Request(call_id, xid, arg, {}))
        try:
            await event.wait()
        finally:
            del self._replies[call_id]
        reply = box[0]
        if reply.fault is not None:
            await self._out(xid, f"fault {reply.fault.code}: {reply.fault.message}\n")
        else:
            await self._out(xid, f"reply {reply.value!r}\n")

    async def _fan(self, xid: str, count: int, expect: int, target: str, size: int) -> None:
        server, _, tool = target.partition(".")
        done, replies = anyio.Event(), list[Reply]()
        ids = range(self._next_call + 1, self._next_call + count + 1)
        self._next_call += count
        for call_id in ids:
            self._replies[call_id] = (done, replies)
            await self._send(Call(call_id, xid, server, tool, {"pad": "x" * size}))
        await settle(lambda: len(replies) >= expect)
        tally: dict[str, int] = {}
        for reply in replies:
            key = f"fault {reply.fault.code}" if reply.fault is not None else "ok"
            tally[key] = tally.get(key, 0) + 1
        await self._out(xid, " ".join(f"{k} x{n}" for k, n in sorted(tally.items())) + "\n")

    def read_shared(self, inside: str) -> bytes:
        """A file of the shared directory, by its path as the sandbox sees it (b"" if absent)."""
        shared = self.shared_dir
        if shared is None or not inside.startswith(shared.inside + "/"):
            return b""
        path = shared.host / inside.removeprefix(shared.inside + "/")
        return path.read_bytes() if path.is_file() else b""


class FakeRuntime:
    """A :class:`~bridge_core.runtime.base.RuntimeBackend` of fake sandboxes in a task group."""

    name = "fake"

    def __init__(self, tg: TaskGroup, root: Path) -> None:
        self._tg = tg
        self._root = root
        self.share = True
        """Whether new sandboxes get a shared directory (a remote runtime has none)."""
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.running: dict[str, FakeSandbox] = {}
        self.stopped: list[str] = []
        self.killed: list[str] = []
        self.executions: list[str] = []
        self.hello_versions: tuple[int, ...] = (1,)
        self.start_error: Exception | None = None
        self.start_gate: anyio.Event | None = None
        self.hello_gate: anyio.Event | None = None
        self.starts_begun = 0
        self.start_begun = anyio.Event()
        self.started_event = anyio.Event()
        self.closed = False
        self._holding: dict[str, anyio.Event] = {}
        self._release: dict[str, anyio.Event] = {}
        self._meetings: dict[str, tuple[int, anyio.Event]] = {}

    # Test controls --------------------------------------------------------------------------

    def holding(self, key: str) -> anyio.Event:
        return self._holding.setdefault(key, anyio.Event())

    def release(self, key: str) -> anyio.Event:
        return self._release.setdefault(key, anyio.Event())

    async def meet(self, key: str, count: int) -> None:
        arrived, event = self._meetings.get(key, (0, anyio.Event()))
        self._meetings[key] = (arrived + 1, event)
        if arrived + 1 >= count:
            event.set()
        await event.wait()

    def only(self) -> FakeSandbox:
        (sandbox,) = self.running.values()
        return sandbox

    # RuntimeBackend ---------------------------------------------------------------------------

    async def info(self) -> RuntimeInfo:
        return RuntimeInfo("local", "0", rootless=True, limits_enforced=False)

    async def start(self, spec: SandboxSpec) -> FakeSandbox:
        self.starts_begun += 1
        self.start_begun.set()
        if self.start_gate is not None:
            await self.start_gate.wait()
        if self.start_error is not None:
            raise self.start_error
        host, end = byte_stream_pair()
        sandbox = FakeSandbox(spec.name, host, self)
        if self.share:
            directory = self._root / "sandboxes" / spec.name
            directory.mkdir(parents=True)
            sandbox.shared_dir = SharedDir(directory, "/run/bridge")
        self.sandboxes[spec.name] = sandbox
        self.running[spec.name] = sandbox
        self._tg.start_soon(sandbox.run, end)
        self.started_event.set()
        self.started_event = anyio.Event()
        return sandbox

    # The interface's methods take any Sandbox; this runtime is only ever given its own.
    async def status(self, sandbox: Sandbox) -> SandboxExit:
        assert isinstance(sandbox, FakeSandbox)
        return sandbox.exit if sandbox.exit is not None else SandboxExit(running=True)

    async def stop(self, sandbox: Sandbox, *, grace: float = 2.0) -> None:
        assert isinstance(sandbox, FakeSandbox)
        self.stopped.append(sandbox.name)
        self._remove(sandbox, SandboxExit(running=False, exit_code=143))

    async def kill(self, sandbox: Sandbox) -> None:
        assert isinstance(sandbox, FakeSandbox)
        self.killed.append(sandbox.name)
        self._remove(sandbox, SandboxExit(running=False, exit_code=137))

    async def kill_all(self, sandboxes: Sequence[Sandbox]) -> None:
        for sandbox in sandboxes:
            await self.kill(sandbox)

    def kill_from_outside(self, sandbox: FakeSandbox) -> None:
        sandbox.end(SandboxExit(running=False, exit_code=137, error="killed from outside"))

    def _remove(self, sandbox: FakeSandbox, exit_state: SandboxExit) -> None:
        sandbox.end(exit_state)
        self.running.pop(sandbox.name, None)
        if sandbox.shared_dir is not None:  # its directory goes with it, as a container's does
            shutil.rmtree(sandbox.shared_dir.host, ignore_errors=True)

    async def remove_leftovers(self) -> int:
        return 0

    async def aclose(self) -> None:
        self.closed = True


class RecordingGateway:
    """Answers calls by tool name: ``ok``, ``fail`` (CallFailed), ``boom`` (a bug), ``slow``."""

    def __init__(self) -> None:
        self.calls: list[tuple[CallContext, str, str]] = []
        self.cancelled: list[str] = []
        self.slow_started = anyio.Event()

    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.calls.append((ctx, server, tool))
        if tool == "fail":
            raise CallFailed(ErrorCode.UNKNOWN_TOOL, f"{server} has no tool {tool!r}")
        if tool == "weird":
            return {"content": {1, 2}}  # a set: the wire cannot carry it
        if tool == "boom":
            raise RuntimeError("secret internal detail")
        if tool == "slow":
            self.slow_started.set()
            try:
                await anyio.sleep(math.inf)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(tool)
                raise
        return {"content": [{"type": "text", "text": f"{server}.{tool}"}], "isError": False}

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> Any:
        if method == "discovered_servers":
            return ["alpha", "beta"]
        raise CallFailed(ErrorCode.UNKNOWN_METHOD, f"unknown method {method!r}")


async def settle(condition: Callable[[], bool]) -> None:
    """Let every task run until ``condition`` holds (the fake has no real I/O, so tasks that are
    all blocked and a false condition means it will never hold: bounded by fail_after)."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.wait_all_tasks_blocked()
            if not condition():
                await anyio.lowlevel.checkpoint()


@dataclass
class Harness:
    runtime: FakeRuntime
    gateway: RecordingGateway
    state_dir: Path
    tg: TaskGroup

    def config(self, **overrides: Any) -> SessionConfig:
        settings: dict[str, Any] = {"image": "fake:1", "pool_size": 0, "interrupt_grace": 0.3}
        settings.update(overrides)
        return SessionConfig(**settings)

    def manager(self, **overrides: Any) -> SessionManager:
        return SessionManager(
            self.config(**overrides),
            runtime=self.runtime,
            gateway=self.gateway,
            state_dir=self.state_dir,
        )


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with anyio.create_task_group() as tg:
        yield Harness(FakeRuntime(tg, tmp_path / "runtime"), RecordingGateway(), tmp_path, tg)
        tg.cancel_scope.cancel()


__all__ = [
    "FakeRuntime",
    "FakeSandbox",
    "Harness",
    "MemoryByteStream",
    "RecordingGateway",
    "RuntimeUnavailable",
    "SandboxStartError",
    "byte_stream_pair",
    "settle",
]


# --- durable links (test_durable_link.py, test_snapshot_copy.py) ------------------------------

STATE = b"MCPSNAP1" + bytes(8) + b"opaque to the host"


def disk_of(root: Path, *sizes: int) -> int:
    """Disk the budget counts for saved states of ``sizes`` bytes in a store under ``root``: the
    rule under test (each state's file and its metadata in whole blocks), never byte counts."""
    block = block_size(root)
    return sum(disk_cost(size, block) for size in sizes)


def link_on(root: Path, settings: StoreSettings, client: str | None = None) -> DurableLink:
    """The link of ``client``'s session "default" on a new store in ``root`` with ``settings``."""
    store = SessionStore(root, settings)
    store.open()
    return DurableLink(store, client, "default")


def asked(link: DurableLink) -> bool:
    """:attr:`DurableLink.lost_last`, read anew (mypy would narrow the property)."""
    return link.lost_last


@pytest.fixture
def link(tmp_path: Path) -> DurableLink:
    return link_on(tmp_path, StoreSettings())


def saved_path(link: DurableLink) -> Path | None:
    saved = link.store.saved(None, "default")
    return None if saved is None else saved.path


async def take_snapshot(link: DurableLink, message: Snapshot) -> None:
    """Deliver ``message`` as the snapshot the link expects; it must end settled."""
    link.expect_snapshot()
    await link.on_snapshot(message)
    assert link.settled.is_set()
