"""The saving child of a durable session's sandbox: forked by :class:`~._snapshot.SnapshotTaker`,
it serialises the namespace frozen at the fork and tars ``/tmp`` into a pipe, in records the
parent forwards as ``Snapshot`` and ``snapshot_copy`` frames, then reports what it saved.

A state is never made larger than :func:`state_limit` (what a sandbox with this one's memory
limit could load back: a restore holds the whole state in memory): the child measures the
namespace and ``/tmp`` (by their files' sizes, a sparse file's holes included, as the tar
would hold them) before it writes anything, and stops writing once past it; its report then
says why instead of what it saved (see ``docs/sessions.md``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import struct
from collections.abc import Callable
from typing import Any, BinaryIO, NamedTuple, cast

from bridge_sandbox_client._pickling import MAX_UNSAVED, pickle_namespace
from bridge_sandbox_client._tmpfiles import TooLarge, tar_size, write_tar

__all__ = ["CHUNK", "HostCopy", "state_limit"]

CHUNK = 4 * 1024 * 1024
"""Bytes per ``Snapshot`` frame (the channel's frame limit is 16 MiB)."""
CHILD_SECONDS = 600
"""A saving child still running after this is killed by its own alarm (it must never linger)."""
CHILD_NICENESS = 10
"""How much the saving child lowers its CPU priority (raising niceness needs no privilege)."""
MAX_LAYOUT = 4096
"""Out-of-band buffers of a state whose place the sandbox remembers (one that did not change is
copied by the host; past this many, the rest are sent again)."""
_REPORT_LIMIT = 1024 * 1024
"""Most bytes of the saving child's report read (its unsaved names, cut, JSON-escaped, take at
most a few hundred KiB)."""
_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read (cgroup v2, then v1)."""


def state_limit() -> int | None:
    """The largest state this sandbox makes: its memory limit (a state larger than that could
    never be loaded back by a sandbox of the session); None when no limit can be read."""
    for path in _MEMORY_LIMITS:
        try:
            with open(path, encoding="ascii") as file:
                text = file.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # cgroup v1 says "no limit" with 2**63-ish
            return int(text)
        return None  # "max": unlimited
    return None


class HostCopy(NamedTuple):
    """A state the host holds, as the sandbox knows it: its digest (see :func:`_child`), the
    snapshot that sent it, and where its out-of-band buffers are in it (by their SHA-256 and
    length: at most :data:`MAX_LAYOUT`), for the next state to copy the unchanged ones."""

    digest: bytes
    snapshot_id: str
    layout: dict[tuple[bytes, int], int]


def _read_report(fd: int) -> tuple[tuple[str, ...], HostCopy, bool] | str | None:
    """What the saving child wrote last: the names it left out, the state it made (its digest
    and layout; no snapshot id) and whether that equals the one it was given; or why it made
    none (a str); None when unreadable."""
    try:
        with os.fdopen(fd, "rb", closefd=False) as pipe:
            report = json.loads(pipe.read(_REPORT_LIMIT))
        if "error" in report:
            return str(report["error"])[:1000]
        unsaved = tuple(str(item) for item in report["unsaved"][: MAX_UNSAVED + 1])
        layout = {
            (bytes.fromhex(digest), int(length)): int(offset)
            for digest, offset, length in report["layout"][:MAX_LAYOUT]
        }
        made = HostCopy(bytes.fromhex(report["digest"]), "", layout)
        return unsaved, made, bool(report["same"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _child(
    write_fd: int,
    report_fd: int,
    namespace: dict[str, Any],
    skip: Callable[[str, Any], bool],
    last: HostCopy | None,
    copies: bool,
    limit: int | None = None,
) -> None:
    """The saving child: serialise, write, report, exit; never returns, never talks to the host.

    A state past ``limit`` bytes is not made: found so before writing (the namespace's parts
    and the tar's size from ``/tmp``'s ``lstat``), nothing is written; grown past it while
    written (a file growing under the save), the writing stops. Either way the report says why.

    A state whose digest equals that of ``last`` (the one the host holds) is not written. A
    digest is two SHA-256: of the namespace's part (its header, pickle, table and the SHA-256 of
    each out-of-band buffer) and of the ``/tmp`` tar; the one reported is that of the bytes
    written (the tar hashed as it is written, so it can never describe a ``/tmp`` that changed
    between a first look and the writing). With ``copies`` (protocol version 2), the large
    numpy/pandas buffers are kept out of band and one found in ``last`` is not written: the host
    copies it from there.
    """
    # Imported by the parent before it forked (``SnapshotTaker``), so this takes no import lock
    # a thread of the parent could have held at the fork; a sandbox that never forks a save
    # never loads it (OpenSSL's libcrypto: ~0.7 MiB of every idle session).
    import hashlib

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
        pickled = pickle_namespace(namespace, skip, oob=copies)
        unsaved, head, table = pickled.unsaved, pickled.header(), pickled.table()
        digests = [hashlib.sha256(view).digest() for view in pickled.buffers]
        hashed = hashlib.sha256(head)
        hashed.update(pickled.data)
        hashed.update(table)
        for digest in digests:
            hashed.update(digest)
        state = hashed.digest()
        if limit is not None:
            parts = len(head) + len(pickled.data) + len(table)
            parts += sum(view.nbytes for view in pickled.buffers)
            _check_size(parts, limit)
        tmp = hashlib.sha256()
        # /tmp is read to compare only when the namespace is the same (a changed one is sent
        # anyway): it may hold far more than the namespace.
        same = last is not None and last.digest[: len(state)] == state
        if same:
            write_tar(_hashing(tmp))
            same = last is not None and state + tmp.digest() == last.digest
        layout: list[tuple[str, int, int]] = []
        if same:
            os.close(write_fd)
        else:
            tmp = hashlib.sha256()  # of the bytes written, whatever a first look saw
            known = last.layout if last is not None and copies else {}
            with os.fdopen(write_fd, "wb", buffering=CHUNK) as out:
                records = _Records(out, limit)
                for part in (head, pickled.data, table):
                    records.write(part)
                for view, digest in zip(pickled.buffers, digests, strict=True):
                    if len(layout) < MAX_LAYOUT:
                        layout.append((digest.hex(), records.size, view.nbytes))
                    if (at := known.get((digest, view.nbytes))) is not None:
                        records.copy(at, view.nbytes)
                    else:
                        records.write(view)
                del pickled
                write_tar(_hashing(tmp, cast("BinaryIO", records)))
                records.flush()
        report = {
            "unsaved": unsaved,
            "digest": (state + tmp.digest()).hex(),
            "same": same,
            "layout": layout,
        }
        with os.fdopen(report_fd, "wb") as out:
            out.write(json.dumps(report).encode())
        status = 0
    except TooLarge as exc:
        with contextlib.suppress(OSError), os.fdopen(report_fd, "wb") as out:
            out.write(json.dumps({"error": str(exc)}).encode())
        status = 0
    except BaseException:  # the parent reports the exit status
        pass
    finally:
        os._exit(status)


_RECORD = struct.Struct(">cQQ")
"""A record of the saving child's pipe: ``D`` and a length (then that many bytes of the state;
the second number is 0), or ``C``, an offset and a length (bytes the host copies from the
state it holds)."""
_DATA, _COPY = b"D", b"C"


def _check_size(namespace: int, limit: int) -> None:
    """Raise :class:`TooLarge` (saying why) when a state of a ``namespace`` part of that many
    bytes and ``/tmp`` as it is now would pass ``limit``."""
    tmp, largest = tar_size()
    if namespace + tmp <= limit:
        return
    what = f"its namespace takes {namespace:,} bytes and its /tmp files {tmp:,}"
    if largest is not None:
        name, size, allocated = largest
        what += f" (/tmp/{name}: {size:,} bytes"
        what += f", a sparse file of {allocated:,} bytes on disk)" if allocated < size else ")"
    raise TooLarge(
        f"the session's state would be larger than {limit:,} bytes, the memory limit of its "
        f"sandbox, which could never load it back: {what}"
    )


class _Records:
    """What the saving child writes into its pipe: the state's bytes (in records of up to
    :data:`CHUNK`, small writes gathered) and ranges of the state the host holds to copy;
    past ``limit`` bytes it raises :class:`TooLarge` instead of writing."""

    def __init__(self, out: BinaryIO, limit: int | None = None) -> None:
        self._out = out
        self._limit = limit
        self._pending = bytearray()
        self.size = 0
        """Bytes of the state so far, written or copied."""

    def _count(self, size: int) -> None:
        if self._limit is not None and self.size + size > self._limit:
            raise TooLarge(
                f"the session's state grew past {self._limit:,} bytes, the memory limit of its "
                "sandbox, while it was saved (a file in /tmp growing?)"
            )

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self._count(size)
        if size >= CHUNK:
            self.flush()
            self._record(data, size)
        else:
            self._pending += data
            if len(self._pending) >= CHUNK:
                self.flush()
        self.size += size
        return size

    def copy(self, offset: int, length: int) -> None:
        self._count(length)
        self.flush()
        self._out.write(_RECORD.pack(_COPY, offset, length))
        self.size += length

    def flush(self) -> None:
        if self._pending:
            self._record(self._pending, len(self._pending))
            self._pending = bytearray()

    def _record(self, data: Any, size: int) -> None:
        self._out.write(_RECORD.pack(_DATA, size, 0))
        self._out.write(data)


def _hashing(hashed: Any, out: BinaryIO | None = None) -> BinaryIO:
    """A binary stream for :func:`write_tar` that hashes what passes (see :class:`_Hashing`)."""
    return cast("BinaryIO", _Hashing(hashed, out))


class _Hashing(io.RawIOBase):
    """A writable stream that hashes what passes, and hands it on to ``out`` (if any)."""

    def __init__(self, hashed: Any, out: BinaryIO | None = None) -> None:
        super().__init__()
        self._hashed = hashed
        self._out = out

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._hashed.update(data)
        if self._out is not None:
            self._out.write(data)
        return memoryview(data).nbytes
