"""Full outputs on the host: where they are written, who owns them, how much disk they may take.

An execution's output past the cap streams into a spill file in this bridge's own directory,
``<root>/<pid>-<start time>/`` (mode 0700, files 0600). The directory's name is its owner, as a
container's owner label is (``bridge_core._ownership``): every bridge removes, when it starts, the
directories of owners that are no longer running, so a SIGKILLed bridge leaves no spill behind.

When the execution ended and its sandbox lives on, the file is made read-only and moved into the
sandbox's shared directory (``Sandbox.shared_dir``, bind-mounted read-only into the container),
where the session's code reads it. Nothing runs in the sandbox to save it: no user namespace, no
protocol message, so nothing sandbox code does can delay, fail or alter the saving. A sandbox
that mounts nothing from this machine (the stdio channel of a remote engine) gets the same file
at the same path copied in by its engine (``SharedDir.copy_in``), the host keeping its copy so
the budget below counts it the same way. A kept file
goes with its sandbox (the runtime removes the shared directory with the container, and a dead
bridge's containers with their directories at the next start).

One budget per bridge bounds the disk all of this takes, spills being written and files kept
alike: a spill that needs room deletes the oldest kept files first, and stops (its file then holds
the start of the output only) when the rest of the budget is in spills still being written.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

import anyio

from bridge_core._ownership import current_owner, owner_dir_name, owner_is_alive, parse_owner
from bridge_core.private_files import private_dir
from bridge_core.runtime.base import SharedDir

__all__ = ["BRIDGE_BUDGET", "EXECUTION_LIMIT", "FullOutputs", "SpillFile"]

logger = logging.getLogger("bridge_core.sessions")

MiB = 1024 * 1024
EXECUTION_LIMIT = 48 * MiB
"""Most bytes of one execution's full output kept."""
BRIDGE_BUDGET = 256 * MiB
"""Most bytes of full outputs one bridge keeps on disk, in flight and kept together."""
OUTPUT_SUBDIR = "output"
"""Kept files go to ``<shared dir>/output/<execution id>.txt``."""
FLUSH_BYTES = 256 * 1024
"""Spill writes are batched: one thread hop per 256 KiB, not per frame (200k-line floods)."""
_SHARED_SUBDIR_MODE = 0o755
"""The sandbox's uid (65534, or a mapped one) must traverse it; only the bridge writes."""
_KEPT_MODE = 0o444
"""Readable by the sandbox's uid, writable by nobody: code sees exactly what was printed."""
_PRIVATE_SUBDIR_MODE = 0o700
_PRIVATE_KEPT_MODE = 0o400
"""The host's copy of a file the engine copied in (the sandbox reads its own copy)."""


def remove_dead_owners(root: Path) -> int:
    """Remove the spill directories under ``root`` whose owner bridge is gone; how many.

    Entries that do not name an owner are spill files of bridges from before owners were
    recorded: no running bridge writes such a name any more, and one still running keeps its
    open file (unlinking never breaks an open descriptor), so they go too.
    """
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return 0
    removed = 0
    for entry in entries:
        owner = parse_owner(entry.name.replace("-", ":", 1))
        if owner is not None and owner_is_alive(owner):
            continue  # another bridge sharing the state dir
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        except OSError as exc:  # e.g. another user's file: the next start tries again
            logger.warning("could not remove the leftover spill %s: %s", entry, exc)
            continue
        removed += 1
    return removed


@dataclass(slots=True)
class _Kept:
    size: int
    home: Path
    """The shared directory (host side) it was kept in."""


class FullOutputs:
    """The bridge's full-output files and their budget (one per session manager)."""

    def __init__(self, root: Path, *, budget: int = BRIDGE_BUDGET) -> None:
        self.root = root
        self.area = root / owner_dir_name(current_owner())
        self.budget = budget
        self.used = 0
        """Bytes of spills being written plus files kept, as granted by :meth:`reserve`."""
        self._kept: OrderedDict[Path, _Kept] = OrderedDict()

    def remove_dead_owners(self) -> int:
        """Blocking: remove what dead bridges left under the root (run in a worker thread)."""
        return remove_dead_owners(self.root)

    def remove_own(self) -> None:
        """Blocking: remove this bridge's spill directory (every spill is closed by now)."""
        shutil.rmtree(self.area, ignore_errors=True)

    def open(self) -> tuple[BinaryIO, Path]:
        """Blocking: a new spill file (0600) in this bridge's directory (0700)."""
        private_dir(self.area)
        fd, name = tempfile.mkstemp(prefix="spill-", suffix=".txt", dir=self.area)
        return os.fdopen(fd, "wb", buffering=0), Path(name)  # writes are batched already

    async def reserve(self, wanted: int) -> int:
        """Grant up to ``wanted`` bytes of the budget, deleting the oldest kept files for room."""
        doomed: list[Path] = []
        while self.used + wanted > self.budget and self._kept:
            path, kept = self._kept.popitem(last=False)
            self.used -= kept.size
            doomed.append(path)
        granted = max(0, min(wanted, self.budget - self.used))
        self.used += granted
        if doomed:
            logger.info("deleted %d kept full output(s) to stay within the budget", len(doomed))
            await anyio.to_thread.run_sync(_unlink_all, doomed)
        return granted

    def release(self, size: int) -> None:
        """Give back bytes of a spill that is not kept."""
        self.used = max(0, self.used - size)

    def forget(self, shared: SharedDir) -> None:
        """The sandbox of ``shared`` is going: its runtime removes its files, stop counting them."""
        for path, kept in list(self._kept.items()):
            if kept.home == shared.host:
                del self._kept[path]
                self.used = max(0, self.used - kept.size)

    def kept(self, path: Path, size: int, shared: SharedDir) -> None:
        """Count ``path`` (``size`` bytes already granted) as kept in ``shared``, newest last."""
        self._kept[path] = _Kept(size, shared.host)


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # never fail the execution that needed the room
            logger.warning("could not delete the kept full output %s: %s", path, exc)


class SpillFile:
    """One execution's spill: bytes granted by the budget, written through a worker thread."""

    def __init__(self, outputs: FullOutputs, limit: int) -> None:
        self._outputs = outputs
        self._limit = limit
        self._file: BinaryIO | None = None
        self.path: Path | None = None
        self.size = 0
        self.incomplete = False
        """True when the file holds only the start of the output (limit, budget, or an error)."""
        self.error: str | None = None
        """Why the bridge could not keep the full output, if it could not."""
        self._kept = False
        self._buffer: list[bytes] = []
        self._buffered = 0

    async def open(self) -> None:
        try:
            self._file, self.path = await anyio.to_thread.run_sync(self._outputs.open)
        except OSError as exc:
            self._give_up(exc)

    def _give_up(self, exc: OSError) -> None:
        # A full or read-only host disk must not end the execution: only the full copy is lost.
        logger.warning("cannot keep the full output on the host: %s", exc)
        self.error = f"the bridge could not store it ({exc.strerror or exc})"
        self.incomplete = True
        self._buffer.clear()
        self._buffered = 0

    async def write(self, data: bytes) -> None:
        """Append ``data`` (or the part of it the limit and the budget still allow)."""
        if self._file is None or self.incomplete:
            return
        room = min(len(data), self._limit - self.size)
        granted = await self._outputs.reserve(room) if room > 0 else 0
        if granted < len(data):
            data = data[:granted]
            self.incomplete = True
        self.size += len(data)
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered >= FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        """Write the buffered bytes to the file."""
        file = self._file
        if file is None or not self._buffer:
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        try:
            await anyio.to_thread.run_sync(file.write, data)
        except OSError as exc:
            self._give_up(exc)

    async def keep(self, shared: SharedDir, name: str) -> str:
        """Move the file into ``shared`` (read-only); its path as the sandbox sees it.

        Raises OSError when the host cannot (the caller reports it).
        """
        await self.flush()
        file, source = self._file, self.path
        if file is None or source is None:
            raise OSError(errno.ENOENT, "the spill file is gone")
        target = shared.host / OUTPUT_SUBDIR / name
        # Shielded: a move that happened is always recorded (the budget counts every kept file).
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(
                partial(_move_read_only, file, source, target, mounted=shared.copy_in is None)
            )
            self._file = None
            self._kept = True
            self._outputs.kept(target, self.size, shared)
        inside = f"{shared.inside}/{OUTPUT_SUBDIR}/{name}"
        if shared.copy_in is not None:
            # A sandbox without the mount (a remote engine): the engine copies it in.
            await shared.copy_in(target, inside)
        return inside

    async def aclose(self) -> None:
        """Close and delete the spill unless it was kept; its bytes go back to the budget."""
        file, self._file = self._file, None
        if self._kept:
            return
        self._outputs.release(self.size)
        path = self.path
        if file is None and path is None:
            return

        def close() -> None:
            if file is not None:
                file.close()
            if path is not None:
                path.unlink(missing_ok=True)

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close)


def _move_read_only(file: BinaryIO, source: Path, target: Path, *, mounted: bool = True) -> None:
    """``mounted``: the sandbox's uid reads the directory itself; otherwise (copied in by the
    engine) the host's copy stays private to the bridge."""
    file.flush()
    file.close()
    directory_mode, kept_mode = (
        (_SHARED_SUBDIR_MODE, _KEPT_MODE) if mounted else (_PRIVATE_SUBDIR_MODE, _PRIVATE_KEPT_MODE)
    )
    target.parent.mkdir(mode=directory_mode, exist_ok=True)
    os.chmod(target.parent, directory_mode)  # mkdir's mode is filtered by the umask
    os.chmod(source, kept_mode)
    try:
        os.rename(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        # The shared directory is on another filesystem than the state dir: copy, then drop.
        shutil.copyfile(source, target)
        os.chmod(target, kept_mode)
        with contextlib.suppress(FileNotFoundError):
            source.unlink()
