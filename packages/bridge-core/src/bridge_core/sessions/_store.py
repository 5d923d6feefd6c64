"""Saved session states on disk: opaque bytes the bridge stores and moves, never reads.

One store is a private directory (``<state dir>/sessions/saved/<store name>``) that one bridge
at a time owns, through an exclusive ``flock`` held for its whole life: a second bridge with the
same state dir and store name finds it taken and keeps its sessions in memory only, so two
bridges never load each other's sessions. A bridge that was killed releases the lock with its
process, and the next one with the same store brings its sessions back.

A saved state is written to a private temp file as its chunks arrive (bounded by ``max_bytes``)
and renamed over the previous one only once complete and within the total disk budget: the last
good state is never lost to a half-written file. Its file name is a digest of (client, session
name), so no name chosen by a client becomes a path.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bridge_core.private_files import private_dir, write_private

__all__ = ["SavedState", "SessionStore", "StoreSettings", "StateWriter"]

logger = logging.getLogger("bridge_core.sessions")

READ_CHUNK = 4 * 1024 * 1024
"""Bytes per ``Restore`` frame (the channel's frame limit is 16 MiB)."""
MAX_UNSAVED_LISTED = 50
MAX_UNSAVED_CHARS = 300
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


@dataclass(frozen=True, slots=True)
class SavedState:
    path: Path
    size: int
    saved_at: float
    unsaved: tuple[str, ...]


class SessionStore:
    """The saved states of one bridge's sessions (the methods block: run them in a thread)."""

    def __init__(self, state_dir: Path, settings: StoreSettings) -> None:
        self.settings = settings
        self.root = state_dir / "saved" / settings.name
        self._lock_fd: int | None = None
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
                elif entry.suffix in (_SUFFIX, _META) and entry.stat().st_mtime < cutoff:
                    entry.unlink()
                    logger.info("dropped saved session state %s (older than retention)", entry)

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
        for entry in self.root.glob(f"{self._owner(client)}-*"):
            entry.unlink(missing_ok=True)

    def saved(self, client: str | None, name: str) -> SavedState | None:
        base = self._base(client, name)
        path = base.with_suffix(_SUFFIX)
        try:
            info = path.stat()
        except OSError:
            return None
        unsaved: tuple[str, ...] = ()
        with contextlib.suppress(OSError, ValueError, TypeError):
            meta = json.loads(base.with_suffix(_META).read_text(encoding="utf-8"))
            unsaved = tuple(str(item)[:MAX_UNSAVED_CHARS] for item in meta["unsaved"])
        return SavedState(path, info.st_size, info.st_mtime, unsaved[:MAX_UNSAVED_LISTED])

    def has_saved(self, client: str | None, name: str) -> bool:
        return self._base(client, name).with_suffix(_SUFFIX).exists()

    @staticmethod
    def touch(state: SavedState) -> None:
        """The state was used: retention counts from now."""
        with contextlib.suppress(OSError):
            os.utime(state.path)

    def delete(self, client: str | None, name: str) -> None:
        base = self._base(client, name)
        for suffix in (_SUFFIX, _META):
            base.with_suffix(suffix).unlink(missing_ok=True)

    def writer(self, client: str | None, name: str) -> StateWriter:
        return StateWriter(self, self._base(client, name))

    def total_bytes(self, *, besides: Path | None = None) -> int:
        total = 0
        for entry in self.root.glob(f"*{_SUFFIX}"):
            if entry != besides:
                with contextlib.suppress(OSError):
                    total += entry.stat().st_size
        return total


class StateWriter:
    """One saved state being received; :meth:`commit` makes it the session's last good one."""

    def __init__(self, store: SessionStore, base: Path) -> None:
        self._store = store
        self._base = base
        self.size = 0
        self.error = ""
        fd, temp = tempfile.mkstemp(dir=store.root, prefix=".", suffix=".tmp")
        self._temp = Path(temp)
        self._file = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        if self.error:
            return
        limit = self._store.settings.max_bytes
        if self.size + len(data) > limit:
            self.error = (
                f"the session's state is larger than {limit:,} bytes (MCP_BRIDGE_SESSION_STATE_MAX)"
            )
            self.abort()
            return
        self._file.write(data)
        self.size += len(data)

    def commit(self, unsaved: tuple[str, ...]) -> str:
        """Replace the saved state atomically; return "" or why it was not kept."""
        if error := self._check_disk():
            return error
        os.replace(self._temp, self._base.with_suffix(_SUFFIX))
        self._write_meta(unsaved)
        return ""

    def _check_disk(self) -> str:
        """Close the temp file; "" if the state fits the store's disk budget, else why not."""
        if self.error:
            return self.error
        self._file.close()
        limit = self._store.settings.disk_limit
        used = self._store.total_bytes(besides=self._base.with_suffix(_SUFFIX))
        if used + self.size > limit:
            self.abort()
            return (
                f"the saved states of this bridge's sessions would take {used + self.size:,} "
                f"bytes, more than MCP_BRIDGE_SESSION_STATE_DISK ({limit:,}): reset sessions "
                "you no longer need, or raise the limit"
            )
        return ""

    def _write_meta(self, unsaved: tuple[str, ...]) -> None:
        meta = {"unsaved": [item[:MAX_UNSAVED_CHARS] for item in unsaved[:MAX_UNSAVED_LISTED]]}
        write_private(self._base.with_suffix(_META), json.dumps(meta).encode())

    def commit_new(self, unsaved: tuple[str, ...]) -> str:
        """Like :meth:`commit` for a state that must not replace one (a fork): "" or why not."""
        if error := self._check_disk():
            return error
        path = self._base.with_suffix(_SUFFIX)
        try:
            os.link(self._temp, path)  # atomic, and never over an existing state
        except FileExistsError:
            self.abort()
            return "a saved state of that name exists (a fork never replaces one)"
        self._temp.unlink(missing_ok=True)
        self._write_meta(unsaved)
        return ""

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        self._temp.unlink(missing_ok=True)
