"""One saved state being written: its temp file, its size limits, copies from the state before.

A :class:`StateWriter` receives a state's chunks (``write``) and the ranges it copies from the
session's last committed state (``copy``, protocol version 2), counts each against the largest
state and the store's disk budget before writing it, and :meth:`StateWriter.commit` renames the
finished file over the previous one. The store that owns the directory and the budget
(:mod:`._store`) is reached through the :class:`~._state_files.StateLedger` it gives the writer.
The bytes are opaque: nothing here reads a state.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bridge_core.sessions._state_files import (
    META_SUFFIX,
    STATE_SUFFIX,
    Epoch,
    StateLedger,
    write_meta,
)

__all__ = ["COPY_STEP", "CommittedState", "StateWriter"]


@dataclass(frozen=True, slots=True)
class CommittedState:
    """A state file a writer committed: a later state of the same session copies parts of it
    while it is still that file (the same inode and size)."""

    path: Path
    inode: int
    size: int

    def open(self) -> int:
        """An fd to read it, or -1 when the file there is no longer this one."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return -1
        try:
            found = os.fstat(fd)
        except OSError:
            found = None
        if found is None or (found.st_ino, found.st_size) != (self.inode, self.size):
            os.close(fd)
            return -1
        return fd


def _copy_range(source: int, target: int, offset: int, length: int) -> None:
    """Append ``length`` bytes of ``source`` from ``offset`` at ``target``'s position: by
    ``copy_file_range`` (the kernel copies, or shares the blocks), else by reading."""
    while length:
        try:
            done = os.copy_file_range(source, target, min(length, COPY_STEP), offset)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            done = _copy_by_reading(source, target, min(length, COPY_STEP), offset)
        if done <= 0:
            raise OSError(errno.EIO, "the state it copies from ended early")
        offset += done
        length -= done


def _copy_by_reading(source: int, target: int, length: int, offset: int) -> int:
    data = os.pread(source, length, offset)
    view = memoryview(data)
    while view:
        view = view[os.write(target, view) :]
    return len(data)


COPY_STEP = 64 * 1024 * 1024
"""Bytes copied by one call (each in a worker thread: bounded so that none runs for long; a
longer ``snapshot_copy`` is copied in steps, see :meth:`DurableLink.on_snapshot_copy`)."""


class StateWriter:
    """One saved state being received; :meth:`commit` makes it the session's last good one."""

    def __init__(self, store: StateLedger, base: Path, epoch: Epoch | None = None) -> None:
        self._store = store
        self._base = base
        self._epoch = epoch
        self.size = 0
        """Bytes written."""
        self.held = 0
        """Bytes of disk counted for this state in the store's budget until commit or abort:
        its blocks and its metadata's (``StateLedger.disk_cost`` of :attr:`size`)."""
        self.error = ""
        self.too_large = False
        """Whether the state passed the largest one kept: saving it again would fail again."""
        self.over_budget = False
        """Whether the disk limits refused it: saving it again fails until room is made."""
        self.offered = 0
        """Bytes of the state given to :meth:`write` and :meth:`copy`, kept or not."""
        self.committed: CommittedState | None = None
        """What :meth:`commit` made the session's state (a later state may copy from it)."""
        self._source: tuple[CommittedState, int] | None = None
        """The state :meth:`copy` copies from, and its open fd (-1: gone)."""
        self._done = False
        try:
            fd, temp = tempfile.mkstemp(dir=store.root, prefix=".", suffix=".tmp")
        except OSError as exc:  # no file can be made (quota, read-only, no fd): may pass
            self.error = f"the state could not be written: {exc.strerror or exc}"
            self._done = True  # nothing reserved, nothing to remove
            self._temp: Path | None = None
            self._file: BinaryIO = io.BytesIO()
            return
        self._temp = Path(temp)
        self._file = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        self.offered += len(data)
        if self.error or not self._room(len(data)):
            return
        try:
            self._file.write(data)
        except OSError as exc:  # the disk is full (or failing): may pass, like the budget
            self.error = f"the state could not be written: {exc.strerror or exc}"
            self.abort()

    def copy(self, source: CommittedState, offset: int, length: int) -> None:
        """Append ``length`` bytes of ``source`` from ``offset`` (a part of the state that did
        not change since ``source``, the session's last committed state)."""
        inside = offset >= 0 and length >= 0 and offset + length <= source.size
        if inside:  # a range inside a state it holds: part of this state, kept or not
            self.offered += length
        if self.error:
            return
        if not inside:
            self.error = "a part it copies is not inside the state it copies from"
        elif self._source is None or self._source[0] != source:
            self._close_source()
            self._source = (source, source.open())
            if self._source[1] < 0:
                self.error = "the state it copies from is gone or was replaced"
        if self.error:
            self.abort()
            return
        if self._source is None or not self._room(length):
            return
        try:
            self._file.flush()
            _copy_range(self._source[1], self._file.fileno(), offset, length)
        except OSError as exc:
            self.error = f"the state could not be written: {exc.strerror or exc}"
            self.abort()

    def _room(self, size: int) -> bool:
        """Count ``size`` more bytes against the largest state, and the disk they take against
        the disk limits; False (and the writer aborted) when they do not fit."""
        limit = self._store.max_bytes
        if self.size + size > limit:
            self.too_large = True
            self.error = (
                f"the session's state is larger than {limit:,} bytes ([sessions] state_max in "
                "bridge.toml)"
            )
            self.abort()
            return False
        path = self._base.with_suffix(STATE_SUFFIX)
        cost = self._store.disk_cost(self.size + size)
        if error := self._store.reserve(path, cost - self.held):
            self.error = error
            self.over_budget = True
            self.abort()
            return False
        self.size += size
        self.held = cost
        return True

    def _close_source(self) -> None:
        if self._source is not None and self._source[1] >= 0:
            with contextlib.suppress(OSError):
                os.close(self._source[1])
        self._source = None

    def commit(
        self, unsaved: tuple[str, ...], *, same_meta: bool = False, checkpoint: str = ""
    ) -> str:
        """Replace the saved state atomically; return "" or why it was not kept.

        ``same_meta``: the session's metadata on disk was written by the caller's last commit
        with these ``unsaved`` names: it is only marked as of now, not written again (replacing a
        file by a rename costs ext4 a flush of the new file's data, ~0.4 ms here).
        ``checkpoint``: the label of the checkpoint this state is, kept in its metadata.
        """
        if error := self._finish():
            return error
        assert self._temp is not None  # made, or the error above says why not
        try:
            refused = self._store.install(
                self._temp, self._base.with_suffix(STATE_SUFFIX), self.held, self._epoch
            )
        except OSError:
            self._store.release(self._base.with_suffix(STATE_SUFFIX), self.held)
            self._temp.unlink(missing_ok=True)
            raise
        if refused:
            return refused
        if not (same_meta and self._touch_meta()):
            write_meta(self._base, unsaved, checkpoint=checkpoint)
        return ""

    def commit_new(self, unsaved: tuple[str, ...], forked_from: str) -> str:
        """Like :meth:`commit` for a fork of session ``forked_from``, whose state must not
        replace one: "" or why not."""
        if error := self._finish():
            return error
        assert self._temp is not None  # made, or the error above says why not
        try:
            refused = self._store.install_new(
                self._temp, self._base.with_suffix(STATE_SUFFIX), self.held, self._epoch
            )
        except OSError:
            self._store.release(self._base.with_suffix(STATE_SUFFIX), self.held)
            raise
        if refused:
            return refused
        self._write_meta(unsaved, forked_from)
        return ""

    def _finish(self) -> str:
        """Close the temp file; "" if it may be committed, else why not."""
        self._close_source()
        if self.error or not self._room(0):  # nothing written: its metadata's blocks all the same
            return self.error
        self._file.flush()
        inode = os.fstat(self._file.fileno()).st_ino
        self._file.close()
        self._done = True  # what it holds leaves the reserve in the commit
        self.committed = CommittedState(self._base.with_suffix(STATE_SUFFIX), inode, self.size)
        return ""

    def _touch_meta(self) -> bool:
        """Date the metadata as of this commit; False when it is missing."""
        try:
            os.utime(self._base.with_suffix(META_SUFFIX))
        except FileNotFoundError:
            return False
        return True

    def _write_meta(self, unsaved: tuple[str, ...], forked_from: str = "") -> None:
        write_meta(self._base, unsaved, forked_from)

    def abort(self) -> None:
        self._close_source()
        self.committed = None
        with contextlib.suppress(OSError):
            self._file.close()
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
        if not self._done:  # what it holds leaves the budget once
            self._done = True
            self._store.release(self._base.with_suffix(STATE_SUFFIX), self.held)
