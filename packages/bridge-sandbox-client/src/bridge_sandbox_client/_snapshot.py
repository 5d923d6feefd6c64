"""Durable sessions, the sandbox's half: save the namespace and ``/tmp`` after each successful
execution, and load them back into a fresh sandbox of the same session.

Saving never holds up the next execution: the main thread ``os.fork()``\\ s (copy-on-write, well
under a millisecond for a small process) and goes back to its inbox; the child serialises the
namespace frozen at that instant with cloudpickle, tars ``/tmp`` and writes both into a pipe; a
thread of this process forwards the pipe as ``Snapshot`` frames over the one channel (so frames
never interleave and no shared filesystem is needed, whatever engine runs the sandbox).

The bytes are opaque to the host; only a sandbox of the same session ever loads them. Names whose
values cannot be pickled (open files, sockets, generators, threads, ...) are left out, named, and
everything else is kept, shared references included (one pickle of all the good names).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import signal
import struct
import tarfile
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import cloudpickle  # type: ignore[import-untyped]
from bridge_protocol import FORK_SNAPSHOT_PREFIX, Snapshot

__all__ = ["SnapshotTaker", "restore_state"]

MAGIC = b"MCPSNAP1"
"""Format marker of a saved state: MAGIC, u64 length of the namespace pickle, the pickle, a tar
stream of ``/tmp``."""
CHUNK = 4 * 1024 * 1024
"""Bytes per ``Snapshot`` frame (the channel's frame limit is 16 MiB)."""
CHILD_SECONDS = 600
"""A saving child still running after this is killed by its own alarm (it must never linger)."""
CHILD_NICENESS = 10
"""How much the saving child lowers its CPU priority (raising niceness needs no privilege)."""
TMP = Path("/tmp")
SKIPPED_TMP = frozenset({".matplotlib"})
"""Entries of ``/tmp`` every sandbox gets from its image (caches): not saved."""
_GLOBALS = "__main__-globals"
"""Persistent id of the session namespace itself: functions and classes defined by user code
are restored with the live namespace as their globals, not a private copy of it."""
_HEADER = struct.Struct(">I")
_LENGTH = struct.Struct(">Q")

Send = Callable[[Snapshot], None]


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    def __init__(self, file: BinaryIO, namespace: dict[str, Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        # cloudpickle gives the functions of one module a fresh globals dict, kept here by the
        # id of their real globals: ours is replaced by a marker the loader resolves.
        self._globals = self.globals_ref.setdefault(id(namespace), {"__name__": "__main__"})

    def persistent_id(self, obj: Any) -> str | None:
        return _GLOBALS if obj is self._globals else None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: BinaryIO, namespace: dict[str, Any]) -> None:
        super().__init__(file)
        self._namespace = namespace

    def persistent_load(self, pid: Any) -> Any:
        if pid != _GLOBALS:
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self._namespace


def _dumps(values: dict[str, Any], namespace: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, namespace).dump(values)
    return buffer.getvalue()


def _saveable(namespace: dict[str, Any], skip: Callable[[str, Any], bool]) -> dict[str, Any]:
    return {
        name: value
        for name, value in namespace.items()
        if not (name.startswith("__") and name.endswith("__")) and not skip(name, value)
    }


def pickle_namespace(
    namespace: dict[str, Any], skip: Callable[[str, Any], bool]
) -> tuple[bytes, list[str]]:
    """The pickle of every saveable name, and ``"name (type): reason"`` for each left out."""
    values = _saveable(namespace, skip)
    try:
        return _dumps(values, namespace), []
    except Exception:
        pass
    unsaved = []
    for name, value in list(values.items()):
        try:
            _dumps({name: value}, namespace)
        except Exception as exc:
            del values[name]
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            unsaved.append(f"{name} ({type(value).__name__}): {reason}")
    return _dumps(values, namespace), unsaved


def _write_tmp(out: BinaryIO) -> None:
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for entry in sorted(TMP.iterdir()):
            if entry.name not in SKIPPED_TMP:
                tar.add(entry, arcname=entry.name)


class SnapshotTaker:
    """Forks a saving child after each successful execution and forwards what it writes."""

    def __init__(self, send: Send, log: Callable[[str], None]) -> None:
        self._send = send
        self._log = log
        self._sequence = 0

    def fork_id(self) -> str:
        """A new id for a fork's snapshot (the host writes it into the fork, not the session)."""
        self._sequence += 1
        return f"{FORK_SNAPSHOT_PREFIX}{os.getpid()}-{self._sequence}"

    def take(
        self,
        namespace: dict[str, Any],
        skip: Callable[[str, Any], bool],
        snapshot_id: str | None = None,
    ) -> None:
        """Start saving ``namespace`` and ``/tmp`` as they are now; returns at once."""
        if snapshot_id is None:
            self._sequence += 1
            snapshot_id = f"s-{os.getpid()}-{self._sequence}"
        try:
            read_fd, write_fd = os.pipe()
        except OSError as exc:
            self._fail(snapshot_id, f"no pipe for the saving process: {exc}")
            return
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            self._fail(snapshot_id, f"the saving process could not start: {exc}")
            return
        if pid == 0:  # pragma: no cover (the child; measured by the integration tests)
            os.close(read_fd)
            _child(write_fd, namespace, skip)
        os.close(write_fd)
        threading.Thread(
            target=self._forward,
            args=(snapshot_id, read_fd, pid),
            name="bridge-snapshot",
            daemon=True,
        ).start()

    def _fail(self, snapshot_id: str, error: str) -> None:
        try:
            self._send(Snapshot(snapshot_id, last=True, error=error))
        except (OSError, ValueError) as exc:
            self._log(f"could not report a failed snapshot: {exc}")

    def _forward(self, snapshot_id: str, read_fd: int, pid: int) -> None:
        error, unsaved = "", ()
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                header = pipe.read(_HEADER.size)
                if len(header) == _HEADER.size:
                    unsaved = tuple(json.loads(pipe.read(_HEADER.unpack(header)[0])))
                    while chunk := pipe.read(CHUNK):
                        self._send(Snapshot(snapshot_id, data=chunk))
        except (OSError, ValueError) as exc:
            error = f"the state could not be sent: {exc}"
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # user code reaped it (os.wait()): its status is unknown
            status = 0 if not error else 1
        if status and not error:
            if os.WIFSIGNALED(status):
                error = f"the saving process was killed by signal {os.WTERMSIG(status)}"
            else:
                error = "the saving process failed (see the container log)"
        try:
            self._send(Snapshot(snapshot_id, last=True, unsaved=unsaved, error=error))
        except (OSError, ValueError) as exc:
            self._log(f"could not end snapshot {snapshot_id}: {exc}")


def _child(write_fd: int, namespace: dict[str, Any], skip: Callable[[str, Any], bool]) -> None:
    """The saving child: serialise, write, exit; never returns, never talks to the host."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(CHILD_SECONDS)
        # Background work: within the container, the session's next execution comes first (the
        # host is in another CPU group, where this changes nothing).
        with contextlib.suppress(OSError):
            os.nice(CHILD_NICENESS)
        # fds 1 and 2 are the parent's capture pipes: nothing of the child may reach the output.
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        data, unsaved = pickle_namespace(namespace, skip)
        with os.fdopen(write_fd, "wb", buffering=CHUNK) as out:
            header = json.dumps(unsaved).encode()
            out.write(_HEADER.pack(len(header)) + header)
            out.write(MAGIC + _LENGTH.pack(len(data)))
            out.write(data)
            del data
            _write_tmp(out)
        status = 0
    except BaseException:  # the parent reports the exit status
        pass
    finally:
        os._exit(status)


def restore_state(data: bytes, namespace: dict[str, Any]) -> str:
    """Load a saved state into ``namespace`` and ``/tmp``; return "" or why it was refused.

    All or nothing for the namespace: on any error it is left exactly as it was.
    """
    if not data:
        return ""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LENGTH.size:
        return "it is not a saved session state (wrong format marker)"
    start = len(MAGIC) + _LENGTH.size
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    if start + length > len(data):
        return "it is truncated"
    before = dict(namespace)
    try:
        values = _Unpickler(io.BytesIO(data[start : start + length]), namespace).load()
        if not isinstance(values, dict):
            raise pickle.UnpicklingError(f"expected a dict of names, got {type(values).__name__}")
        namespace.update(values)
        with tarfile.open(fileobj=io.BytesIO(data[start + length :]), mode="r|") as tar:
            tar.extractall(TMP, filter="tar")
    except Exception as exc:
        namespace.clear()
        namespace.update(before)
        return f"it could not be loaded ({type(exc).__name__}: {str(exc)[:300]})"
    return ""


def is_bridge_object(value: Any) -> bool:
    """Objects the sandbox client injects (the ``mcp`` proxies): rebuilt, never saved."""
    if isinstance(value, types.ModuleType):
        return value.__name__ == "mcp" or value.__name__.startswith(("mcp.", "mcp_"))
    return type(value).__module__.startswith("bridge_sandbox_client")
