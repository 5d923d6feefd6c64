"""Saved session states on disk: opaque bytes the bridge stores and moves, never reads.

One store is a private directory (``<state dir>/sessions/saved/<store name>``) that one bridge
at a time owns, through an exclusive ``flock`` held for its whole life: a second bridge with the
same state dir and store name finds it taken and keeps its sessions in memory only, so two
bridges never load each other's sessions. A bridge that was killed releases the lock with its
process, and the next one with the same store brings its sessions back.

A saved state is written to a private temp file as its chunks arrive (bounded by ``max_bytes``)
and renamed over the previous one only once complete: the last good state is never lost to a
half-written file. The disk budget counts the disk a state takes (its file and its metadata in
whole blocks of the store's file system, :func:`~._state_files.disk_cost`) before each chunk is
written, states still being written included (a sandbox can start one and never end it), under
one lock (sessions save at the same time): the store holds at most ``disk_limit`` plus, while a
state replaces its session's previous one, that previous one. Its file name is a digest of
(client, session name), so no name chosen by a client becomes a path.

What a state is on disk (its files and metadata, written and read back) is
:mod:`._state_files`'s; the free space the states leave on their file system,
:mod:`._free_space`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge_core.private_files import private_dir
from bridge_core.sessions._free_space import short_of_space, warn_if_short_of_space
from bridge_core.sessions._state_files import (
    DEFAULT_BLOCK,
    META_SUFFIX,
    RESET_MEANWHILE,
    STATE_SUFFIX,
    Epoch,
    SavedState,
    block_size,
    disk_cost,
    hint_of,
    read_state,
    write_meta,
)
from bridge_core.sessions._state_writer import StateWriter

__all__ = ["Epoch", "SavedState", "SessionStore", "StateWriter", "StoreSettings"]

logger = logging.getLogger("bridge_core.sessions")

READ_CHUNK = 4 * 1024 * 1024
"""Bytes per ``Restore`` frame (the channel's frame limit is 16 MiB)."""
MAX_SAVED_SESSIONS = 1000
"""Saved sessions one client keeps at most (the one client of a stdio bridge too): forks and new
session names cost a few KiB of disk each, and the bridge walks a client's states (hints, a
client leaving)."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    name: str = "default"
    """Which store of the state dir this bridge uses (``[sessions] store``)."""
    max_bytes: int = 512 * 1024 * 1024
    """Largest saved state of one session (``[sessions] state_max``)."""
    disk_limit: int = 4 * 1024 * 1024 * 1024
    """Disk all saved states of the store take, metadata and whole blocks counted
    (``[sessions] state_disk``)."""
    retention: float = 7 * 24 * 3600.0
    """Seconds a saved state unused is kept (``[sessions] state_retention``)."""
    client_share: int | None = None
    """Most of ``disk_limit`` the saved states of one HTTP client may take, so that one client
    cannot leave the others unsaved (``[sessions] state_disk_per_client``); the single
    client of a stdio bridge has the whole store."""


class SessionStore:
    """The saved states of one bridge's sessions (the methods block: run them in a thread)."""

    def __init__(
        self,
        state_dir: Path,
        settings: StoreSettings,
        *,
        disk_usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage,
    ) -> None:
        self.settings = settings
        self._disk_usage = disk_usage
        """(total, used, free) bytes of the file system holding a path (a seam for tests)."""
        self.root = state_dir / "saved" / settings.name
        self._lock_fd: int | None = None
        self._budget = threading.Lock()
        self.block = DEFAULT_BLOCK
        """The allocation unit of the store's file system (known once :meth:`open` ran)."""
        self._committed: Counter[str] = Counter()
        """Disk the finished states take per owner (:meth:`disk_cost`; kept up to date by this
        store, its only writer); the owner is the first part of a state's file name."""
        self._reserved: Counter[str] = Counter()
        """Disk counted for the states still being written, per owner."""
        self._states: Counter[str] = Counter()
        """Saved states per owner (see :data:`MAX_SAVED_SESSIONS`)."""
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
                "restart); give each bridge its own store with [sessions] store in bridge.toml"
            )
            logger.warning("%s", self.refusal)
            return
        self._lock_fd = fd
        self.block = block_size(self.root)
        self._sweep()
        for entry in self.root.glob(f"*{STATE_SUFFIX}"):
            self._committed[_owner_of(entry)] += self._taken(entry)
            self._states[_owner_of(entry)] += 1
        warn_if_short_of_space(
            self._disk_usage, self.root, sum(self._committed.values()), self.settings.disk_limit
        )

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
                elif entry.suffix == STATE_SUFFIX and entry.stat().st_mtime < cutoff:
                    # The state's mtime is its last use; its metadata's, its last save.
                    entry.unlink()
                    entry.with_suffix(META_SUFFIX).unlink(missing_ok=True)
                    logger.info("dropped saved session state %s (older than retention)", entry)
                elif (
                    entry.suffix == META_SUFFIX
                    and not entry.with_suffix(STATE_SUFFIX).exists()
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
            state = path.suffix == STATE_SUFFIX
            size = self._taken(path) if state else 0  # its metadata's blocks included
            try:
                path.unlink()
            except FileNotFoundError:
                if state:  # deleted outside the bridge: its bytes may still be counted
                    self._recount(_owner_of(path))
                return
            self._committed[_owner_of(path)] -= size
            if state:
                self._states[_owner_of(path)] -= 1

    def _recount(self, owner: str) -> None:
        """Count ``owner``'s committed bytes again from the disk (``_budget`` held): a state
        deleted outside the bridge must not count against the disk limits until a restart."""
        with contextlib.suppress(OSError):  # unreadable: the count stays as it was
            states = list(self.root.glob(f"{owner}-*{STATE_SUFFIX}"))
            self._committed[owner] = sum(self._taken(entry) for entry in states)
            self._states[owner] = len(states)

    def _found_gone(self, path: Path) -> None:
        with self._budget:
            self._recount(_owner_of(path))

    def saved(self, client: str | None, name: str) -> SavedState | None:
        return read_state(self._base(client, name))

    def hint(self, client: str | None, name: str) -> tuple[str, ...]:
        """The modules the saved state of ``client``'s session ``name`` names at its head (the
        sandbox wrote them: a hint past the limits or with anything but plain module names is
        dropped whole); () when none. Only those bytes are read, never the pickle after them."""
        return tuple(hint_of(self._base(client, name).with_suffix(STATE_SUFFIX)))

    def recent_hints(self, client: str | None, states: int) -> tuple[str, ...]:
        """The hints of ``client``'s ``states`` most recently used saved states, merged (each
        module once, at most :data:`~bridge_protocol.hints.MAX_HINT_MODULES`)."""
        from bridge_protocol.hints import MAX_HINT_MODULES  # see hint_of

        dated = []
        for entry in self.root.glob(f"{self._owner(client)}-*{STATE_SUFFIX}"):
            with contextlib.suppress(OSError):
                dated.append((entry.stat().st_mtime, entry))
        merged: dict[str, None] = {}
        for _, entry in sorted(dated, reverse=True)[:states]:
            for module in hint_of(entry):
                merged.setdefault(module)
        return tuple(merged)[:MAX_HINT_MODULES]

    def has_saved(self, client: str | None, name: str) -> bool:
        return self._base(client, name).with_suffix(STATE_SUFFIX).exists()

    @staticmethod
    def touch(state: SavedState) -> None:
        """The state was used: retention counts from now."""
        with contextlib.suppress(OSError):
            os.utime(state.path)

    def keep(self, client: str | None, name: str) -> bool:
        """The saved state of ``client``'s session ``name`` is still in use (retention); False
        when it is gone (deleted outside the bridge)."""
        path = self._base(client, name).with_suffix(STATE_SUFFIX)
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
            if not base.with_suffix(STATE_SUFFIX).exists():
                self._recount(_owner_of(base))  # deleted outside the bridge: its bytes are free
                return False
        # A reset between the check and the write leaves metadata without a state: never read
        # (a state is found by its own file) and swept at the next start.
        write_meta(base, unsaved)
        return True

    def delete(self, client: str | None, name: str) -> None:
        base = self._base(client, name)
        with self._budget:
            _bump(self._deletions, base.name)
        for suffix in (STATE_SUFFIX, META_SUFFIX):
            self._unlink(base.with_suffix(suffix))

    def writer(self, client: str | None, name: str, epoch: Epoch | None = None) -> StateWriter:
        """A new state of ``client``'s session ``name``; with ``epoch``, refused at commit if the
        session's states were deleted since it was taken."""
        return StateWriter(self, self._base(client, name), epoch)

    def total_bytes(self) -> int:
        """Disk the saved states on disk take, as the budget counts it (:meth:`disk_cost`)."""
        return sum(self._taken(entry) for entry in self.root.glob(f"*{STATE_SUFFIX}"))

    def disk_cost(self, size: int) -> int:
        """Disk a saved state of ``size`` bytes is counted for in this store (its file and its
        metadata in whole blocks: :func:`~._state_files.disk_cost`)."""
        return disk_cost(size, self.block)

    def _taken(self, path: Path) -> int:
        """:meth:`disk_cost` of the state at ``path``; 0 when there is none."""
        try:
            return self.disk_cost(path.stat().st_size)
        except OSError:
            return 0

    def fits(self, client: str | None, name: str, size: int) -> bool:
        """Whether a state of ``size`` bytes for ``client``'s session ``name`` would fit the disk
        limits now (a refused state is asked for again only then)."""
        path = self._base(client, name).with_suffix(STATE_SUFFIX)
        with self._budget:
            return not self._over(path, self.disk_cost(size))

    # --- the writers' side (StateLedger) -------------------------------------------------------

    @property
    def max_bytes(self) -> int:
        return self.settings.max_bytes

    def reserve(self, path: Path, more: int) -> str:
        """Count ``more`` bytes of disk for the state being written for ``path``: "" if they fit
        the store's disk limit and, for an HTTP client, its share of it (the state it replaces is
        not counted twice), else which limit they would pass. Nothing more always fits (the
        count of saved sessions is checked again at install)."""
        if more <= 0:
            return ""
        with self._budget:
            if error := self._over(path, more):
                return error
            self._reserved[_owner_of(path)] += more
            return ""

    def _over(self, path: Path, size: int) -> str:
        """Which limit ``size`` more bytes of disk for ``path`` would pass ("" if none;
        ``_budget`` held)."""
        owner = _owner_of(path)
        replaced = self._taken(path)
        if error := self._too_many(path):
            return error
        used = sum(self._committed.values()) - replaced + sum(self._reserved.values()) + size
        limit = self.settings.disk_limit
        if used > limit:
            return (
                f"the saved states of this bridge's sessions would take {used:,} bytes of disk "
                f"(each state's file and metadata in whole {self.block:,}-byte blocks), more "
                f"than [sessions] state_disk in bridge.toml ({limit:,}): reset sessions you no "
                "longer need, or raise the limit"
            )
        share = self.settings.client_share
        if share is not None and owner != self._owner(None):
            mine = self._committed[owner] - replaced + self._reserved[owner] + size
            if mine > share:
                return (
                    f"this client's saved sessions would take {mine:,} bytes of disk, more "
                    "than one client's share [sessions] state_disk_per_client in bridge.toml "
                    f"({share:,}): reset sessions you no longer need"
                )
        return short_of_space(self._disk_usage, self.root, size)

    def _too_many(self, path: Path) -> str:
        """Why a new state at ``path`` (none is there) would pass the number of saved sessions
        its client keeps ("" if it is there, or fits; ``_budget`` held)."""
        if self._states[_owner_of(path)] < MAX_SAVED_SESSIONS or path.exists():
            return ""
        return (
            f"this client already keeps {MAX_SAVED_SESSIONS} saved sessions, the most the bridge "
            "keeps for one client (MAX_SAVED_SESSIONS): reset sessions you no longer need"
        )

    def release(self, path: Path, held: int) -> None:
        with self._budget:
            self._reserved[_owner_of(path)] -= held

    def install(self, temp: Path, path: Path, held: int, epoch: Epoch | None) -> str:
        """Rename the finished ``temp`` over ``path``: the ``held`` bytes of disk reserved for
        it count as committed now. "" or why not (``temp`` removed): the session's states were
        deleted since ``epoch``, or it would be one saved session too many for its client."""
        with self._budget:
            refused = RESET_MEANWHILE if self._outdated(epoch) else self._too_many(path)
            if refused:
                temp.unlink(missing_ok=True)
                self._reserved[_owner_of(path)] -= held
                return refused
            old = self._taken(path)  # 0 when there is none (a state is never counted as 0)
            os.replace(temp, path)
            owner = _owner_of(path)
            self._committed[owner] += held - old
            self._reserved[owner] -= held
            self._states[owner] += int(not old)
            return ""

    def install_new(self, temp: Path, path: Path, held: int, epoch: Epoch | None) -> str:
        """Link the finished ``temp`` as ``path`` unless a state is there (never replaced) or
        the session's states were deleted since ``epoch``: "" or why not."""
        with self._budget:
            owner = _owner_of(path)
            refused = RESET_MEANWHILE if self._outdated(epoch) else self._too_many(path)
            if refused:
                temp.unlink(missing_ok=True)
                self._reserved[owner] -= held
                return refused
            try:
                os.link(temp, path)  # atomic, and never over an existing state
            except FileExistsError:
                self._reserved[owner] -= held
                return "a saved state of that name exists (a fork never replaces one)"
            finally:
                temp.unlink(missing_ok=True)
            self._committed[owner] += held
            self._reserved[owner] -= held
            self._states[owner] += 1
            return ""


def _bump(deletions: Counter[str], key: str) -> None:
    """Count a deletion of ``key`` if a state of it may be in flight (an epoch was taken)."""
    if key in deletions:
        deletions[key] += 1


def _owner_of(path: Path) -> str:
    """Whose state ``path`` is: the digest of its client that starts the file name."""
    return path.name.split("-", 1)[0]
