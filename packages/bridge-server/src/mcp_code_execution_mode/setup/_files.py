"""File operations of ``setup``: atomic replacement, backups, digests. Everything it creates is
private to the user (0600): the files hold the moved servers' credentials."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "PRIVATE",
    "atomic_write",
    "canonical_digest",
    "digest",
    "read_bytes",
    "real_path",
    "remove",
    "write_backup",
]

PRIVATE = 0o600
MAX_CONFIG_BYTES = 256 * 1024 * 1024
"""As discovery: ``~/.claude.json`` grows to tens of MB; past this it is not a config file."""


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


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise OSError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
        return path.read_bytes()
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes, mode: int = PRIVATE) -> None:
    """Replace ``path`` by ``data`` in one rename: a crash leaves the old or the new file, never
    half of one (the client may read it at any moment)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_backup(path: Path, data: bytes, stamp: str) -> Path:
    """Save ``data`` beside ``path`` as ``NAME.mcp-bridge-backup-STAMP`` (0600, never over an
    existing file)."""
    for attempt in range(100):
        suffix = stamp if attempt == 0 else f"{stamp}-{attempt}"
        backup = path.with_name(f"{path.name}.mcp-bridge-backup-{suffix}")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return backup
    raise OSError(f"cannot create a backup of {path}: 100 backups with stamp {stamp} exist")


def remove(path: Path) -> None:
    """Delete a file if it is there."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
