"""Directories and files only the bridge's own user can reach.

Everything the bridge keeps on disk (channel sockets, tool lists, process records, spilled
output, the seccomp profile, the private podman service's socket and log) may carry user data or
give control over a sandbox, so other local accounts must get nothing of it. The umask does not
give that: it is the user's (often 022), and an existing file or directory keeps its mode, e.g.
a state dir an older version created 0755. Hence explicit modes everywhere, and directories of
ours tightened when found open.

Two kinds of paths: :func:`private_dir` for directories that are the bridge's by definition
(the state dir and what it creates inside), which it creates, tightens and refuses to use when
another account owns them; :func:`make_dirs` and :data:`PRIVATE_FILE_MODE` for files the user
named (log file, audit log), whose missing directories are created private but whose existing
directories and files are left as the user made them. The functions block: async callers run
them in a worker thread.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from bridge_core.errors import BridgeError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "UnsafeDirectory",
    "make_dirs",
    "private_dir",
    "write_private",
]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


class UnsafeDirectory(PermissionError, BridgeError):
    """A directory the bridge keeps private data in belongs to another account, or is shared.

    A :class:`PermissionError` too, so code that treats a failing disk as non-fatal (the tool
    cache, spilled output) degrades the same way instead of writing there.
    """


def make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each mode 0700; existing ones stay as they are."""
    if path.is_dir():
        return
    if path.parent != path:
        make_dirs(path.parent)
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        return  # made by another bridge in the meantime (or not a directory: the caller sees)
    os.chmod(path, PRIVATE_DIR_MODE)  # mkdir's mode passes through the umask


def private_dir(path: Path) -> Path:
    """Make ``path`` a directory that only this user can enter; return it.

    Missing: created 0700 (missing parents too). Existing and owned by this user: group and
    other bits are removed. Owned by another account, or a world-writable sticky directory
    such as ``/tmp`` (shared by design): :class:`UnsafeDirectory`, because whoever controls the
    directory can read or replace what the bridge puts there.
    """
    make_dirs(path)
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeDirectory(
            f"{path} belongs to uid {info.st_uid}, not to the bridge's user (uid {os.geteuid()}):"
            " that account could read or replace what the bridge keeps there; remove it or give"
            " the bridge a directory of its own (MCP_BRIDGE_STATE_DIR)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_ISVTX and mode & stat.S_IWOTH:
        raise UnsafeDirectory(
            f"{path} is a shared directory (world-writable, sticky, like /tmp); the bridge keeps "
            "its state private: give it a directory of its own (MCP_BRIDGE_STATE_DIR), e.g. "
            f"{path / 'mcp-code-execution-mode'}"
        )
    if mode & _OTHERS:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, mode 0600 whatever the old file's mode was.

    A temp file in the same directory (``mkstemp`` creates it 0600), then a rename: a reader
    (another bridge sharing the state dir, podman reading the seccomp profile) never sees half.
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
