"""File operations of ``setup``: reading, digests, and the one object that writes.

Every write ``setup`` makes (a config file, a backup, its record, a folder, a removal) is a method
of :class:`Disk`; nothing else in the package writes. ``run_setup`` builds the disk once: a real
one, or :class:`DryRun`, which writes nothing and lists what it would have done. So ``--dry-run``
cannot write, whatever verb and flags come with it: no code path holds a writing disk.

Every file written is private to the user (0600), whatever mode it had: the files hold the
servers' credentials (the servers file receives them; ``--undo`` puts them back into the client's
file), and a file the user made by hand is usually 0644 (their umask).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from bridge_core.local_files import read_regular

__all__ = [
    "PRIVATE",
    "Disk",
    "DryRun",
    "canonical_digest",
    "digest",
    "open_to_others",
    "read_bytes",
    "link_folders",
    "real_path",
]

PRIVATE = 0o600
MAX_CONFIG_BYTES = 256 * 1024 * 1024
"""As discovery: ``~/.claude.json`` grows to tens of MB; past this it is not a config file."""
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def digest(data: bytes) -> str:
    """SHA-256 of the bytes, hex."""
    return hashlib.sha256(data).hexdigest()


def canonical_digest(value: Any) -> str:
    """SHA-256 of a JSON value independent of key order and layout (TOML values included)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return digest(text.encode())


def real_path(path: Path) -> Path:
    """The file a symlinked config points to (dotfile managers link them): edit the target, so
    the link survives."""
    return path.resolve() if path.is_symlink() else path


def link_folders(path: Path) -> list[Path]:
    """The folders of the symlinks ``path`` goes through to its file (none for a plain file):
    whoever can write one of them can point the config elsewhere."""
    folders: list[Path] = []
    for _ in range(40):  # the kernel's own bound on links followed
        if not path.is_symlink():
            break
        folders.append(path.parent)
        path = path.parent / os.readlink(path)
    return folders


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist (a FIFO, a device or a file past
    MAX_CONFIG_BYTES is an OSError: :func:`bridge_core.local_files.read_regular`)."""
    return read_regular(path, MAX_CONFIG_BYTES)


def open_to_others(path: Path) -> int | None:
    """The mode of an existing file when other accounts have any access to it, else None."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    return mode if mode & _OTHERS else None


def _backup_name(path: Path, stamp: str, attempt: int) -> Path:
    suffix = stamp if attempt == 0 else f"{stamp}-{attempt}"
    return path.with_name(f"{path.name}.mcp-bridge-backup-{suffix}")


class Disk:
    """Writes, each private (0600 files, 0700 folders). :attr:`done` lists them, in order."""

    dry_run = False

    def __init__(self) -> None:
        self.done: list[str] = []

    def make_dir(self, path: Path) -> None:
        """Create ``path`` and missing parents (0700); an existing folder stays as it is."""
        if not path.is_dir():
            self.done.append(f"create the folder {path}")
            self._make_dir(path)

    def write(self, path: Path, data: bytes) -> None:
        """Replace ``path`` by ``data`` in one rename, mode 0600: a crash leaves the old or the
        new file, never half of one (the client may read it at any moment)."""
        self.done.append(f"write {path}")
        self._write(path, data)

    def backup(self, path: Path, data: bytes, stamp: str) -> Path:
        """Save ``data`` beside ``path`` as ``NAME.mcp-bridge-backup-STAMP`` (0600, never over an
        existing file); returns the backup's path."""
        for attempt in range(100):
            backup = _backup_name(path, stamp, attempt)
            if backup.exists() or not self._create(backup, data):
                continue
            self.done.append(f"back up {path} as {backup}")
            return backup
        raise OSError(f"cannot create a backup of {path}: 100 backups with stamp {stamp} exist")

    def remove(self, path: Path) -> None:
        """Delete a file if it is there."""
        if path.exists():
            self.done.append(f"remove {path}")
            self._remove(path)

    # The writes themselves; DryRun overrides each one to do nothing.

    def _make_dir(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def _write(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, PRIVATE)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _create(self, path: Path, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return True

    def _remove(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class DryRun(Disk):
    """A disk that writes nothing: :attr:`done` lists what a real run would have written."""

    dry_run = True

    def _make_dir(self, path: Path) -> None:
        pass

    def _write(self, path: Path, data: bytes) -> None:
        pass

    def _create(self, path: Path, data: bytes) -> bool:
        return True

    def _remove(self, path: Path) -> None:
        pass
