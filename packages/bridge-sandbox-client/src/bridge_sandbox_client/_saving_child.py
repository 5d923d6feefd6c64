"""The saving child of a durable session's sandbox: forked by :class:`~._snapshot.SnapshotTaker`,
it serialises the namespace frozen at the fork and tars ``/tmp`` into a pipe, in records the
parent forwards as ``Snapshot`` and ``snapshot_copy`` frames, then reports what it saved.

A state is never made larger than :func:`~._snapshot.state_limit` (what a sandbox with this
one's memory limit could load back: a restore holds the whole state in memory): the child
measures the namespace and ``/tmp`` (by their files' sizes, a sparse file's holes included, as
the tar would hold them) before it writes anything, and stops writing once past it; its report
then says why instead of what it saved (see ``docs/sessions.md``).

Everything the child runs is imported with this module, which the parent imports before it
forks (``SnapshotTaker``): an import in the child could wait forever on an import lock a thread
of the parent held at the fork. A sandbox that never forks a save never loads it, nor
:mod:`hashlib` (OpenSSL's libcrypto), :mod:`tarfile` and the ``shutil``, ``bz2`` and ``lzma`` it
imports: ~1.6 MiB of every idle session's memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import stat
import tarfile
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from bridge_sandbox_client import _tmpfiles
from bridge_sandbox_client._pickling import pickle_namespace
from bridge_sandbox_client._saving_pipe import (
    _COPY,
    _DATA,
    _RECORD,
    CHUNK,
    MAX_LAYOUT,
    HostCopy,
)
from bridge_sandbox_client._tmpfiles import TooLarge

__all__ = ["child", "tar_size", "write_tar"]

CHILD_SECONDS = 600
"""A saving child still running after this is killed by its own alarm (it must never linger)."""
CHILD_NICENESS = 10
"""How much the saving child lowers its CPU priority (raising niceness needs no privilege)."""


def child(
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


def write_tar(out: BinaryIO) -> None:
    """Tar ``/tmp`` into ``out`` (the forked child's: any size, streamed)."""
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for name in sorted(os.listdir(_tmpfiles.TMP)):
            if name not in _tmpfiles.SKIPPED:
                tar.add(os.path.join(_tmpfiles.TMP, name), arcname=name)


def tar_size() -> tuple[int, tuple[str, int, int] | None]:
    """About the bytes :func:`write_tar` would write for ``/tmp`` now (a header per entry, each
    regular file's size: a sparse file's holes are written as zeros), and its largest regular
    file as (name, size, bytes allocated on disk), None when it has none. Reads no content."""
    total, largest = 2 * tarfile.BLOCKSIZE, None

    def visit(folder: str, prefix: str, top: bool) -> None:
        nonlocal total, largest
        with os.scandir(folder) as listing:
            entries = list(listing)
        for entry in entries:
            if top and entry.name in _tmpfiles.SKIPPED:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile: the tar will not hold it either
            total += tarfile.BLOCKSIZE
            if stat.S_ISDIR(info.st_mode):
                visit(entry.path, f"{prefix}{entry.name}/", False)
            elif stat.S_ISREG(info.st_mode):
                total += -(-info.st_size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
                if largest is None or info.st_size > largest[1]:
                    largest = (prefix + entry.name, info.st_size, info.st_blocks * 512)

    visit(os.fspath(_tmpfiles.TMP), "", True)
    return total, largest
