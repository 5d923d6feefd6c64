"""Saved session states on disk: opaque bytes the bridge stores and moves, never reads.

One store is a private directory (``<state dir>/sessions/saved/<store name>``) that one bridge
at a time owns, through an exclusive ``flock`` held for its whole life: a second bridge with the
same state dir and store name finds it taken and keeps its sessions in memory only, so two
bridges never load each other's sessions. A bridge that was killed releases the lock with its
process, and the next one with the same store brings its sessions back.

A saved state is written to a private temp file as its chunks arrive (bounded by ``max_bytes``)
and renamed over the previous one only once complete: the last good state is never lost to a
half-written file. The disk budget counts each chunk before it is written, states still being
written included (a sandbox can start one and never end it), under one lock (sessions save at
the same time): the store holds at most ``disk_limit`` plus, while a state replaces its session's
previous one, that previous one. Its file name is a digest of (client, session
name), so no name chosen by a client becomes a path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import logging
import math
import os
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bridge_core.private_files import private_dir, write_private

__all__ = ["Epoch", "SavedState", "SessionStore", "StateWriter", "StoreSettings"]

logger = logging.getLogger("bridge_core.sessions")

READ_CHUNK = 4 * 1024 * 1024
"""Bytes per ``Restore`` frame (the channel's frame limit is 16 MiB)."""
MAX_UNSAVED_LISTED = 50
MAX_UNSAVED_CHARS = 300
MAX_ORIGIN_CHARS = 200
"""Characters of a fork's origin read back from its metadata (a session name is far shorter)."""
_SUFFIX = ".state"
_META = ".meta"


@dataclass(frozen=True, slots=True)
class StoreSettings:
    name: str = "default"
    """Which store of the state dir this bridge uses (``MCP_BRIDGE_SESSION_STORE``)."""
    max_bytes: int = 512 * 1024 * 1024
    """Largest saved state of one session (``MCP_BRIDGE_SESSION_STATE_MAX``)."""
    disk_limit: int = 4 * 1024 * 1024 * 1024
    """Total of all saved states of the store (``MCP_BRIDGE_SESSION_STATE_DISK``)."""
    retention: float = 7 * 24 * 3600.0
    """Seconds a saved state unused is kept (``MCP_BRIDGE_SESSION_STATE_RETENTION``)."""
    client_share: int | None = None
    """Most of ``disk_limit`` the saved states of one HTTP client may take, so that one client
    cannot leave the others unsaved (``MCP_BRIDGE_SESSION_STATE_DISK_PER_CLIENT``); the single
    client of a stdio bridge has the whole store."""


RESET_MEANWHILE = "the session was reset (or its client left) while this state was being saved"


@dataclass(frozen=True, slots=True)
class Epoch:
    """A session's deletion counts when a state of it was begun (see :meth:`SessionStore.epoch`)."""

    base: str
    own: int
    owner: int


@dataclass(frozen=True, slots=True)
class SavedState:
    path: Path
    size: int
    saved_at: float
    unsaved: tuple[str, ...]
    forked_from: str = ""
    """The session this state was forked from, until the fork saves a state of its own."""


class SessionStore:
    """The saved states of one bridge's sessions (the methods block: run them in a thread)."""

    def __init__(self, state_dir: Path, settings: StoreSettings) -> None:
        self.settings = settings
        self.root = state_dir / "saved" / settings.name
        self._lock_fd: int | None = None
        self._budget = threading.Lock()
        self._committed: Counter[str] = Counter()
        """Bytes of the finished states on disk per owner (kept up to date by this store, its only
        writer); the owner is the first part of a state's file name."""
        self._reserved: Counter[str] = Counter()
        """Bytes written so far by the states still being written, per owner."""
        self._deletions: Counter[str] = Counter()
        """How often each session's states (by file name) and each owner's were deleted: a state
        begun before a deletion (a reset, a client gone) is never installed after it. Only what
        an epoch was taken for is counted (a sandbox or a fork saves there): resets of names
        never run and clients leaving without a session add nothing."""
        self.refusal = ""
        """Why this bridge keeps no saved state ("" once :meth:`open` took the store)."""

    @property
    def usable(self) -> bool:
        return self._lock_fd is not None

    def open(self) -> None:
        """Take the store (or record why not), drop expired states and half-written files."""
        private_dir(self.root)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.refusal = (
                f"another bridge of this user is using the session store {self.settings.name!r} "
                "of this state dir, so this bridge's sessions are kept in memory only (lost on "
                "restart); give each bridge its own store with MCP_BRIDGE_SESSION_STORE"
            )
            logger.warning("%s", self.refusal)
            return
        self._lock_fd = fd
        self._sweep()
        for entry in self.root.glob(f"*{_SUFFIX}"):
            self._committed[_owner_of(entry)] += _size(entry)

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _sweep(self) -> None:
        cutoff = time.time() - self.settings.retention
        for entry in self.root.iterdir():
            with contextlib.suppress(OSError):
                if entry.name.endswith(".tmp"):
                    entry.unlink()  # a bridge killed while writing
                elif entry.suffix == _SUFFIX and entry.stat().st_mtime < cutoff:
                    # The state's mtime is its last use; its metadata's, its last save.
                    entry.unlink()
                    entry.with_suffix(_META).unlink(missing_ok=True)
                    logger.info("dropped saved session state %s (older than retention)", entry)
                elif (
                    entry.suffix == _META
                    and not entry.with_suffix(_SUFFIX).exists()
                    and entry.stat().st_mtime < cutoff
                ):
                    entry.unlink()  # its state is gone

    # --- paths --------------------------------------------------------------------------------

    @staticmethod
    def _owner(client: str | None) -> str:
        owner = "" if client is None else f"client:{client}"
        return hashlib.sha256(owner.encode()).hexdigest()[:16]

    def _base(self, client: str | None, name: str) -> Path:
        owner = "" if client is None else f"client:{client}"
        digest = hashlib.sha256(f"{owner}\0{name}".encode()).hexdigest()[:32]
        return self.root / f"{self._owner(client)}-{digest}"

    def delete_client(self, client: str | None) -> None:
        owner = self._owner(client)
        with self._budget:
            _bump(self._deletions, owner)
        for entry in self.root.glob(f"{owner}-*"):
            self._unlink(entry)

    def epoch(self, client: str | None, name: str) -> Epoch:
        """What a state of ``client``'s session ``name`` begun now is valid for: it is refused
        at commit if the session's states were deleted meanwhile."""
        base = self._base(client, name)
        with self._budget:
            own = self._deletions.setdefault(base.name, 0)
            return Epoch(base.name, own, self._deletions.setdefault(_owner_of(base), 0))

    def _outdated(self, epoch: Epoch | None) -> bool:
        """Whether the session of ``epoch`` was deleted since (call with ``_budget`` held)."""
        if epoch is None:
            return False
        owner = epoch.base.split("-", 1)[0]
        return (self._deletions[epoch.base], self._deletions[owner]) != (epoch.own, epoch.owner)

    def _unlink(self, path: Path) -> None:
        with self._budget:
            state = path.suffix == _SUFFIX
            size = _size(path) if state else 0
            try:
                path.unlink()
            except FileNotFoundError:
                if state:  # deleted outside the bridge: its bytes may still be counted
                    self._recount(_owner_of(path))
                return
            self._committed[_owner_of(path)] -= size

    def _recount(self, owner: str) -> None:
        """Count ``owner``'s committed bytes again from the disk (``_budget`` held): a state
        deleted outside the bridge must not count against the disk limits until a restart."""
        with contextlib.suppress(OSError):  # unreadable: the count stays as it was
            states = list(self.root.glob(f"{owner}-*{_SUFFIX}"))
            self._committed[owner] = sum(_size(entry) for entry in states)

    def _found_gone(self, path: Path) -> None:
        with self._budget:
            self._recount(_owner_of(path))

    def saved(self, client: str | None, name: str) -> SavedState | None:
        base = self._base(client, name)
        path = base.with_suffix(_SUFFIX)
        try:
            info = path.stat()
        except OSError:
            return None
        unsaved: tuple[str, ...] = ()
        forked_from = ""
        at = info.st_mtime  # a state without metadata (older versions)
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            meta_path = base.with_suffix(_META)
            at = meta_path.stat().st_mtime  # set by every commit (see StateWriter.commit)
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            unsaved = tuple(str(item)[:MAX_UNSAVED_CHARS] for item in meta["unsaved"])
            forked_from = str(meta.get("forked_from") or "")[:MAX_ORIGIN_CHARS]
            if math.isfinite(when := float(meta.get("saved_at", at))):
                at = when  # written into it by earlier versions
        return SavedState(path, info.st_size, at, unsaved[:MAX_UNSAVED_LISTED], forked_from)

    def hint(self, client: str | None, name: str) -> tuple[str, ...]:
        """The modules the saved state of ``client``'s session ``name`` names at its head (the
        sandbox wrote them: a hint past the limits or with anything but plain module names is
        dropped whole); () when none. Only those bytes are read, never the pickle after them."""
        return tuple(_hint_of(self._base(client, name).with_suffix(_SUFFIX)))

    def recent_hints(self, client: str | None, states: int) -> tuple[str, ...]:
        """The hints of ``client``'s ``states`` most recently used saved states, merged (each
        module once, at most :data:`~bridge_protocol.hints.MAX_HINT_MODULES`)."""
        from bridge_protocol.hints import MAX_HINT_MODULES  # see _hint_of

        dated = []
        for entry in self.root.glob(f"{self._owner(client)}-*{_SUFFIX}"):
            with contextlib.suppress(OSError):
                dated.append((entry.stat().st_mtime, entry))
        merged: dict[str, None] = {}
        for _, entry in sorted(dated, reverse=True)[:states]:
            for module in _hint_of(entry):
                merged.setdefault(module)
        return tuple(merged)[:MAX_HINT_MODULES]

    def has_saved(self, client: str | None, name: str) -> bool:
        return self._base(client, name).with_suffix(_SUFFIX).exists()

    @staticmethod
    def touch(state: SavedState) -> None:
        """The state was used: retention counts from now."""
        with contextlib.suppress(OSError):
            os.utime(state.path)

    def keep(self, client: str | None, name: str) -> bool:
        """The saved state of ``client``'s session ``name`` is still in use (retention); False
        when it is gone (deleted outside the bridge)."""
        path = self._base(client, name).with_suffix(_SUFFIX)
        try:
            os.utime(path)
        except FileNotFoundError:
            self._found_gone(path)  # its bytes are free now
            return False
        except OSError:
            pass  # still there as far as can be told: only its retention clock was not moved
        return True

    def describe(
        self, client: str | None, name: str, epoch: Epoch, unsaved: tuple[str, ...]
    ) -> bool:
        """Record ``unsaved`` for the saved state of ``client``'s session ``name``, whose bytes
        are unchanged; False when there is none (deleted since ``epoch``, or never saved)."""
        base = self._base(client, name)
        with self._budget:
            if self._outdated(epoch):
                return False
            if not base.with_suffix(_SUFFIX).exists():
                self._recount(_owner_of(base))  # deleted outside the bridge: its bytes are free
                return False
        # A reset between the check and the write leaves metadata without a state: never read
        # (a state is found by its own file) and swept at the next start.
        _write_meta(base, unsaved)
        return True

    def delete(self, client: str | None, name: str) -> None:
        base = self._base(client, name)
        with self._budget:
            _bump(self._deletions, base.name)
        for suffix in (_SUFFIX, _META):
            self._unlink(base.with_suffix(suffix))

    def writer(self, client: str | None, name: str, epoch: Epoch | None = None) -> StateWriter:
        """A new state of ``client``'s session ``name``; with ``epoch``, refused at commit if the
        session's states were deleted since it was taken."""
        return StateWriter(self, self._base(client, name), epoch)

    def total_bytes(self) -> int:
        return sum(_size(entry) for entry in self.root.glob(f"*{_SUFFIX}"))

    def fits(self, client: str | None, name: str, size: int) -> bool:
        """Whether a state of ``size`` bytes for ``client``'s session ``name`` would fit the disk
        limits now (a refused state is asked for again only then)."""
        path = self._base(client, name).with_suffix(_SUFFIX)
        with self._budget:
            return not self._over(path, size)

    def _reserve(self, path: Path, size: int) -> str:
        """Count ``size`` more bytes of the state being written for ``path``: "" if they fit the
        store's disk limit and, for an HTTP client, its share of it (the state it replaces is not
        counted twice), else which limit they would pass."""
        with self._budget:
            if error := self._over(path, size):
                return error
            self._reserved[_owner_of(path)] += size
            return ""

    def _over(self, path: Path, size: int) -> str:
        """Which limit ``size`` more bytes for ``path`` would pass ("" if none; ``_budget``
        held)."""
        owner = _owner_of(path)
        replaced = _size(path)
        used = sum(self._committed.values()) - replaced + sum(self._reserved.values()) + size
        limit = self.settings.disk_limit
        if used > limit:
            return (
                f"the saved states of this bridge's sessions would take {used:,} bytes, more "
                f"than MCP_BRIDGE_SESSION_STATE_DISK ({limit:,}): reset sessions you no "
                "longer need, or raise the limit"
            )
        share = self.settings.client_share
        if share is not None and owner != self._owner(None):
            mine = self._committed[owner] - replaced + self._reserved[owner] + size
            if mine > share:
                return (
                    f"this client's saved sessions would take {mine:,} bytes, more than one "
                    f"client's share MCP_BRIDGE_SESSION_STATE_DISK_PER_CLIENT ({share:,}): "
                    "reset sessions you no longer need"
                )
        return ""

    def _release(self, path: Path, size: int) -> None:
        with self._budget:
            self._reserved[_owner_of(path)] -= size

    def _install(self, temp: Path, path: Path, size: int, epoch: Epoch | None) -> bool:
        """Rename the finished ``temp`` over ``path``: its bytes count as committed now. False
        (``temp`` removed) when the session's states were deleted since ``epoch``."""
        with self._budget:
            if self._outdated(epoch):
                temp.unlink(missing_ok=True)
                self._reserved[_owner_of(path)] -= size
                return False
            old = _size(path)
            os.replace(temp, path)
            owner = _owner_of(path)
            self._committed[owner] += size - old
            self._reserved[owner] -= size
            return True

    def _install_new(self, temp: Path, path: Path, size: int, epoch: Epoch | None) -> str:
        """Link the finished ``temp`` as ``path`` unless a state is there (never replaced) or
        the session's states were deleted since ``epoch``: "" or why not."""
        with self._budget:
            owner = _owner_of(path)
            if self._outdated(epoch):
                temp.unlink(missing_ok=True)
                self._reserved[owner] -= size
                return RESET_MEANWHILE
            try:
                os.link(temp, path)  # atomic, and never over an existing state
            except FileExistsError:
                self._reserved[owner] -= size
                return "a saved state of that name exists (a fork never replaces one)"
            finally:
                temp.unlink(missing_ok=True)
            self._committed[owner] += size
            self._reserved[owner] -= size
            return ""


def _bump(deletions: Counter[str], key: str) -> None:
    """Count a deletion of ``key`` if a state of it may be in flight (an epoch was taken)."""
    if key in deletions:
        deletions[key] += 1


def _write_meta(base: Path, unsaved: tuple[str, ...], forked_from: str = "") -> None:
    # Written by the host only; a state the session saves itself has no origin any more. When
    # the state was saved is the metadata's mtime (every commit writes or dates it), not the
    # state's: using a state refreshes the state's mtime (retention counts from its last use).
    meta: dict[str, object] = {
        "unsaved": [item[:MAX_UNSAVED_CHARS] for item in unsaved[:MAX_UNSAVED_LISTED]],
    }
    if forked_from:
        meta["forked_from"] = forked_from
    write_private(base.with_suffix(_META), json.dumps(meta).encode())


def _owner_of(path: Path) -> str:
    """Whose state ``path`` is: the digest of its client that starts the file name."""
    return path.name.split("-", 1)[0]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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

    def __init__(self, store: SessionStore, base: Path, epoch: Epoch | None = None) -> None:
        self._store = store
        self._base = base
        self._epoch = epoch
        self.size = 0
        """Bytes written, each counted in the store's disk budget until commit or abort."""
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
        """Count ``size`` more bytes against the largest state and the disk limits; False (and
        the writer aborted) when they do not fit."""
        limit = self._store.settings.max_bytes
        if self.size + size > limit:
            self.too_large = True
            self.error = (
                f"the session's state is larger than {limit:,} bytes (MCP_BRIDGE_SESSION_STATE_MAX)"
            )
            self.abort()
            return False
        path = self._base.with_suffix(_SUFFIX)
        if error := self._store._reserve(path, size):
            self.error = error
            self.over_budget = True
            self.abort()
            return False
        self.size += size
        return True

    def _close_source(self) -> None:
        if self._source is not None and self._source[1] >= 0:
            with contextlib.suppress(OSError):
                os.close(self._source[1])
        self._source = None

    def commit(self, unsaved: tuple[str, ...], *, same_meta: bool = False) -> str:
        """Replace the saved state atomically; return "" or why it was not kept.

        ``same_meta``: the session's metadata on disk was written by the caller's last commit
        with these ``unsaved`` names: it is only marked as of now, not written again (replacing a
        file by a rename costs ext4 a flush of the new file's data, ~0.4 ms here).
        """
        if error := self._finish():
            return error
        assert self._temp is not None  # made, or the error above says why not
        try:
            installed = self._store._install(
                self._temp, self._base.with_suffix(_SUFFIX), self.size, self._epoch
            )
        except OSError:
            self._store._release(self._base.with_suffix(_SUFFIX), self.size)
            self._temp.unlink(missing_ok=True)
            raise
        if not installed:
            return RESET_MEANWHILE
        if not (same_meta and self._touch_meta()):
            self._write_meta(unsaved)
        return ""

    def commit_new(self, unsaved: tuple[str, ...], forked_from: str) -> str:
        """Like :meth:`commit` for a fork of session ``forked_from``, whose state must not
        replace one: "" or why not."""
        if error := self._finish():
            return error
        assert self._temp is not None  # made, or the error above says why not
        try:
            refused = self._store._install_new(
                self._temp, self._base.with_suffix(_SUFFIX), self.size, self._epoch
            )
        except OSError:
            self._store._release(self._base.with_suffix(_SUFFIX), self.size)
            raise
        if refused:
            return refused
        self._write_meta(unsaved, forked_from)
        return ""

    def _finish(self) -> str:
        """Close the temp file; "" if it may be committed, else why not."""
        self._close_source()
        if self.error:
            return self.error
        self._file.flush()
        inode = os.fstat(self._file.fileno()).st_ino
        self._file.close()
        self._done = True  # its bytes leave the reserve in the commit
        self.committed = CommittedState(self._base.with_suffix(_SUFFIX), inode, self.size)
        return ""

    def _touch_meta(self) -> bool:
        """Date the metadata as of this commit; False when it is missing."""
        try:
            os.utime(self._base.with_suffix(_META))
        except FileNotFoundError:
            return False
        return True

    def _write_meta(self, unsaved: tuple[str, ...], forked_from: str = "") -> None:
        _write_meta(self._base, unsaved, forked_from)

    def abort(self) -> None:
        self._close_source()
        self.committed = None
        with contextlib.suppress(OSError):
            self._file.close()
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
        if not self._done:  # its bytes leave the budget once
            self._done = True
            self._store._release(self._base.with_suffix(_SUFFIX), self.size)


# The hint rules live with the state format in bridge_protocol, imported on first use: the
# protocol's codec and message types are not loaded before a bridge answers ``initialize``.


def _hint_of(path: Path) -> list[str]:
    """The strict hint at the head of the state at ``path`` ([] when none or unreadable)."""
    from bridge_protocol.hints import HEAD_SIZE, hint_from_head

    try:
        with open(path, "rb") as file:
            head = file.read(HEAD_SIZE)
    except OSError:
        return []
    return hint_from_head(head, strict=True) or []
