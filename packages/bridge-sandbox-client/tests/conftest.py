"""A small blocking fake host: listens on a unix socket, runs the REAL sandbox client as a
subprocess connected to it, and answers its calls and requests from plain Python handlers."""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bridge_protocol import (
    SANDBOX_TO_HOST,
    UNCHANGED_SNAPSHOT_PREFIX,
    Call,
    CancelCall,
    Display,
    ErrorCode,
    Execute,
    Fault,
    FrameDecoder,
    Hello,
    Message,
    Output,
    Progress,
    Refusal,
    Reply,
    Request,
    Result,
    SnapshotCopy,
    Welcome,
    encode,
)
from bridge_protocol.names import python_forms
from bridge_sandbox_client import _tmpfiles
from bridge_sandbox_client._snapshot import SnapshotTaker

WAIT = 20.0
"""Upper bound of every wait in these tests (never a sleep: a bound on an event)."""

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class HostFault(Exception):
    """Raised by a handler: the host answers with ``Fault(code, message, data)``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


DENIED_SERVERS = {"vault": "[policy] deny_servers=vault"}
"""Servers the fake host has but refuses (and never lists), with the rule it names."""
DENIED_TOOLS = {("github", "delete-repo"): "[policy] deny_tools=github.delete*"}
"""Tools the fake host has but refuses (and never lists), with the rule it names."""


def host_suggestions(name: str, known: list[str]) -> list[str]:
    """The fake host's did-you-mean: names sharing the first three characters, each once. Not the
    real host's measure on purpose: the sandbox must show whatever the host decided."""
    return sorted({k for k in known if k[:3].lower() == name[:3].lower()})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def default_tools(
    barrier: threading.Barrier, release: threading.Event
) -> dict[str, dict[str, Handler]]:
    def write_file(args: dict[str, Any]) -> dict[str, Any]:
        data = base64.b64decode(args["content"])
        return text(f"wrote {len(data)} bytes to {args['path']}")

    def slow(args: dict[str, Any]) -> dict[str, Any]:
        # Returns only once three calls are in flight at the same time.
        position = barrier.wait(timeout=WAIT)
        return {"content": [], "structuredContent": {"n": args["n"], "arrival": position}}

    def hang(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(WAIT)
        return text("released")

    def denied(args: dict[str, Any]) -> dict[str, Any]:
        raise HostFault(ErrorCode.POLICY_DENIED, "policy denies media.denied")

    def times_out(args: dict[str, Any]) -> dict[str, Any]:
        raise HostFault(ErrorCode.CALL_TIMEOUT, "media.times_out did not answer within 30 s")

    return {
        "github": {
            "create_issue": lambda a: {
                "content": [{"type": "text", "text": "created"}],
                "structuredContent": {"number": 7, "title": a["title"]},
            },
            "get-user.info": lambda a: text(json.dumps({"login": a.get("login", "octo")})),
            "list_issues": lambda a: text(json.dumps([{"title": "bug"}, {"title": "crash"}])),
        },
        "files": {
            "read_file": lambda a: text("month,revenue\n1,10\n"),
            "write_file": write_file,
        },
        "media": {
            "image": lambda a: {
                "content": [
                    {
                        "type": "image",
                        "data": base64.b64encode(PNG_1X1).decode(),
                        "mimeType": "image/png",
                    }
                ]
            },
            "several": lambda a: {
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "[2]"}]
            },
            "nothing": lambda a: {"content": []},
            "fails": lambda a: {
                "content": [{"type": "text", "text": "repository not found"}],
                "isError": True,
            },
            "denied": denied,
            "times_out": times_out,
            "slow": slow,
            "hang": hang,
            "echo": lambda a: {"content": [], "structuredContent": a},
        },
        "my-server": {"ping": lambda a: text("pong")},
    }


@dataclass
class Run:
    """Everything one execution sent, in order."""

    result: Result
    frames: list[Message] = field(default_factory=list)

    def _text(self, stream: str) -> str:
        return "".join(f.text for f in self.frames if isinstance(f, Output) and f.stream == stream)

    @property
    def stdout(self) -> str:
        return self._text("stdout")

    @property
    def stderr(self) -> str:
        return self._text("stderr")

    @property
    def displays(self) -> list[Display]:
        return [f for f in self.frames if isinstance(f, Display)]

    @property
    def progress(self) -> list[Progress]:
        return [f for f in self.frames if isinstance(f, Progress)]

    @property
    def calls(self) -> list[Call]:
        return [f for f in self.frames if isinstance(f, Call)]


class FakeHost:
    """The host side of one sandbox channel, driving a real client subprocess."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "channel.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.settimeout(WAIT)
        self.png = PNG_1X1
        self.barrier = threading.Barrier(3)
        self.release = threading.Event()
        self.tools = default_tools(self.barrier, self.release)
        self.auto_reply = True
        self.messages: queue.Queue[Message | None] = queue.Queue()
        self.requests: list[Request] = []
        self.cancelled: list[int] = []
        self.cancel_seen = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()

    # --- process ---------------------------------------------------------------------------

    def spawn(self, command: list[str] | None = None) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MPL")}
        if command is None:
            command = [sys.executable, "-m", "bridge_sandbox_client", "--socket", self.path]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        return self.process

    def accept(self) -> Hello:
        self.sock, _ = self.listener.accept()
        decoder = FrameDecoder(accept=SANDBOX_TO_HOST)
        self.sock.settimeout(WAIT)
        hello: list[Message] = []
        while not hello:
            hello = decoder.feed(self.sock.recv(65536))
        self.sock.settimeout(None)
        assert isinstance(hello[0], Hello)
        self._decoder = decoder
        return hello[0]

    def start(self, command: list[str] | None = None) -> None:
        self.spawn(command)
        self.accept()
        self.send(Welcome(version=1, session="test"))
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: Message) -> None:
        assert self.sock is not None
        with self._send_lock:
            self.sock.sendall(encode(message))

    def disconnect(self) -> None:
        """Close the channel from the host side (shutdown: another thread may be in recv)."""
        assert self.sock is not None
        self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.release.set()
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            for pipe in (self.process.stdout, self.process.stderr):
                if pipe is not None:
                    pipe.close()
        self.listener.close()

    # --- messages --------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.sock is not None
        try:
            while True:
                data = self.sock.recv(1 << 20)
                if not data:
                    break
                for message in self._decoder.feed(data):
                    self._handle(message)
        except OSError:
            pass
        self.messages.put(None)

    def _handle(self, message: Message) -> None:
        if isinstance(message, CancelCall):
            self.cancelled.append(message.call_id)
            self.cancel_seen.set()
        if self.auto_reply and isinstance(message, (Call, Request)):
            threading.Thread(target=self._answer, args=(message,), daemon=True).start()
        self.messages.put(message)

    def _answer(self, message: Call | Request) -> None:
        try:
            if isinstance(message, Call):
                server = self.tools.get(message.server)
                if server is None:
                    raise HostFault(ErrorCode.UNKNOWN_SERVER, f"unknown server {message.server!r}")
                handler = server.get(message.tool)
                if handler is None:
                    raise HostFault(ErrorCode.UNKNOWN_TOOL, f"unknown tool {message.tool!r}")
                value: Any = handler(dict(message.arguments))
            else:
                self.requests.append(message)
                value = self._request(message.method, dict(message.params))
            reply = Reply(call_id=message.call_id, value=value)
        except HostFault as fault:
            answer = Fault(fault.code, fault.message, fault.data)
            reply = Reply(call_id=message.call_id, fault=answer)
        except threading.BrokenBarrierError:
            reply = Reply(call_id=message.call_id, fault=Fault(ErrorCode.INTERNAL, "barrier"))
        try:
            self.send(reply)
        except OSError:
            pass

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "discovered_servers":
            if params.get("detailed"):
                return [
                    {"name": n, "description": f"{n} server", "tool_count": len(t), "source": "t"}
                    for n, t in self.tools.items()
                ]
            return list(self.tools)
        if method in ("list_tools", "query_tool_docs"):
            server = self._server_named(params["server"])
            names = list(self.tools[server])
            if method == "list_tools":
                return names
            tool = params.get("tool")
            if tool is not None:
                names = [self._tool_named(server, tool)]
            return {
                "server": server,
                "tools": [{"name": n, "description": f"does {n}"} for n in names],
            }
        if method == "search_tool_docs":
            hits = [
                {"server": s, "tool": t, "description": f"does {t}", "score": 90.0}
                for s, tools in self.tools.items()
                for t in tools
                if params["query"] in t
            ]
            return hits[: params["limit"]]
        raise HostFault(ErrorCode.UNKNOWN_METHOD, f"unknown method {method!r}")

    def _server_named(self, name: str) -> str:
        # Like the real host: exact name or Python form; denied → the rule; else suggestions.
        for server, rule in DENIED_SERVERS.items():
            if name in python_forms(server, server=True):
                message = f"server {server!r} is denied by {rule}"
                raise HostFault(ErrorCode.POLICY_DENIED, message, {"rule": rule})
        for server in self.tools:
            if name in python_forms(server, server=True):
                return server
        suggestions = host_suggestions(name.removeprefix("mcp_"), list(self.tools))
        raise HostFault(
            ErrorCode.UNKNOWN_SERVER,
            f"unknown server {name!r}: host suggests {suggestions}",
            {"suggestions": suggestions},
        )

    def _tool_named(self, server: str, name: str) -> str:
        for (denied_server, tool), rule in DENIED_TOOLS.items():
            if denied_server == server and name in python_forms(tool, server=False):
                message = f"tool {server}.{tool} is denied by {rule}"
                raise HostFault(ErrorCode.POLICY_DENIED, message, {"rule": rule})
        for tool in self.tools[server]:
            if name in python_forms(tool, server=False):
                return tool
        suggestions = host_suggestions(name, list(self.tools[server]))
        raise HostFault(
            ErrorCode.UNKNOWN_TOOL,
            f"server {server!r} has no tool {name!r}: host suggests {suggestions}",
            {"suggestions": suggestions},
        )

    def next_message(self, timeout: float = WAIT) -> Message | None:
        return self.messages.get(timeout=timeout)

    def submit(self, code: str, *, repr_limit: int = 10_000) -> str:
        execution_id = f"x{next(self._ids)}"
        self.send(Execute(execution_id=execution_id, code=code, repr_limit=repr_limit))
        return execution_id

    def collect(self, execution_id: str) -> Run:
        frames: list[Message] = []
        while True:
            message = self.next_message()
            assert message is not None, "the client closed the channel before the result"
            frames.append(message)
            if isinstance(message, Result) and message.execution_id == execution_id:
                return Run(result=message, frames=frames)

    def execute(self, code: str, *, repr_limit: int = 10_000) -> Run:
        return self.collect(self.submit(code, repr_limit=repr_limit))

    def wait_for(self, kind: type[Message]) -> Message:
        while True:
            message = self.next_message()
            assert message is not None, f"the client closed the channel before a {kind.KIND}"
            if isinstance(message, kind):
                return message


@pytest.fixture
def unstarted_host() -> Iterator[FakeHost]:
    # Not tmp_path: unix socket paths are limited to ~107 bytes.
    directory = Path(tempfile.mkdtemp(prefix="bsc-"))
    host = FakeHost(directory)
    try:
        yield host
    finally:
        host.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def host(unstarted_host: FakeHost) -> FakeHost:
    unstarted_host.start()
    return unstarted_host


__all__ = [
    "DENIED_SERVERS",
    "DENIED_TOOLS",
    "PNG_1X1",
    "FakeHost",
    "HostFault",
    "Refusal",
    "Run",
    "host_suggestions",
    "text",
]


# --- snapshots (test_snapshot.py, test_snapshot_copies.py) ---------------------------------


class SnapshotHost:
    """Collects what the taker sends, from whichever thread sends it."""

    def __init__(self, *, copies: bool = False) -> None:
        self.frames: queue.Queue[Any] = queue.Queue()
        self.taker = SnapshotTaker(self.frames.put, lambda line: None, copies=copies)

    def snapshot(self, namespace: dict[str, Any]) -> tuple[list[Any], bool]:
        """Take one; return its frames and whether ``take`` sent them all itself (with no saving
        child: a child's frames can all be there too when ``take`` returns, when this thread was
        descheduled longer than the child and its forwarder took, as on a loaded machine)."""
        self.taker.take(namespace, lambda name, value: False)
        forked = self.taker._forwarder is not None  # started only for a saving child
        at_once = not forked and not self.frames.empty() and self._ends()
        frames = []
        while True:
            frame = self.frames.get(timeout=WAIT)
            frames.append(frame)
            if getattr(frame, "last", False):
                return frames, at_once

    def _ends(self) -> bool:
        return bool(self.frames.queue) and getattr(self.frames.queue[-1], "last", False)


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_tmpfiles, "TMP", str(tmp_path))
    return tmp_path


def frames_data(frames: list[Any]) -> bytes:
    """The bytes a whole snapshot's frames carry."""
    return b"".join(frame.data for frame in frames)


class CopyingHost(SnapshotHost):
    """A version-2 host: it keeps each state it got whole and applies ``snapshot_copy``
    frames from the one they name, as the bridge does."""

    def __init__(self) -> None:
        super().__init__(copies=True)
        self.states: dict[str, bytes] = {}

    def saved(self, namespace: dict[str, Any]) -> tuple[list[Any], bytes]:
        frames, _ = self.snapshot(namespace)
        state = bytearray()
        for frame in frames:
            if isinstance(frame, SnapshotCopy):
                state += self.states[frame.base][frame.offset : frame.offset + frame.length]
            else:
                state += frame.data
        if not frames[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX):
            self.states[frames[-1].snapshot_id] = bytes(state)
        return frames, bytes(state)
