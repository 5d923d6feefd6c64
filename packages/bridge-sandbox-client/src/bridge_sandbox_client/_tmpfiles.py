"""The ``/tmp`` part of a saved state: a tar stream of its entries (a symlink is saved as a link,
never followed).

A forked child tars any ``/tmp`` with :mod:`tarfile` itself (streamed, unbounded: see
``_saving_child``). The inline save, of a ``/tmp`` of at most :data:`MAX_ENTRIES` entries and a
few hundred KiB, writes the very same bytes with :class:`SmallTar`, faster: building an entry's
header cost :mod:`tarfile` a user and a group lookup and a pax header (sub-second times), most of
an inline save of a small ``/tmp``. The header of an entry whose ``lstat`` is unchanged since the
previous save is reused; the content of every file is read anew each time, because no ``stat``
can tell that a file's content is unchanged (a file written through a shared writable mapping
keeps its times: measured on tmpfs).

Most sessions keep nothing in ``/tmp``: the tar of that is :data:`EMPTY_TAR`, and a sandbox
loads :mod:`tarfile` (~0.9 MiB of its memory with the ``shutil``, ``bz2`` and ``lzma`` it
imports) only when its ``/tmp`` holds something to save.
"""

from __future__ import annotations

import grp
import io
import os
import pwd
import stat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tarfile

__all__ = [
    "EMPTY_TAR",
    "MAX_ENTRIES",
    "SKIPPED",
    "TMP",
    "Capped",
    "SmallTar",
    "TooLarge",
]

TMP = "/tmp"
SKIPPED = frozenset({".matplotlib"})
"""Entries of ``/tmp`` every sandbox gets from its image (caches): not saved."""
MAX_ENTRIES = 256
"""Most ``/tmp`` entries an inline save walks before leaving the state to a child."""
MAX_NAMES = 64
"""User and group names remembered (files in ``/tmp`` have a handful of owners at most)."""
EMPTY_TAR = bytes(2 * 512).ljust(20 * 512, b"\0")
"""What ``tarfile.open(mode="w|")`` writes for no entry at all: its end of archive (two zero
blocks of 512 bytes) padded with zeros to its 20-block record (a test compares the two)."""
_ERRORS = "surrogateescape"
"""What ``tarfile.open(mode="w|")`` writes with (its defaults, and ``tarfile.DEFAULT_FORMAT``):
the same bytes either way."""


class TooLarge(Exception):
    """The state passed the inline limit: a forked child saves it."""


class Capped(io.BytesIO):
    """A buffer that refuses to grow past ``limit`` bytes (raises :class:`TooLarge`)."""

    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self._limit = limit

    def write(self, data: Any) -> int:
        if self._limit is not None and self.tell() + memoryview(data).nbytes > self._limit:
            raise TooLarge
        return super().write(data)


def _small_tree(limit: int) -> list[tuple[str, str, os.stat_result]]:
    """(path, name in the archive, lstat) of what ``/tmp`` holds, in the order ``tarfile.add``
    visits it; raises :class:`TooLarge` past :data:`MAX_ENTRIES` entries or ``limit`` bytes of
    files (before anything is read)."""
    found: list[tuple[str, str, os.stat_result]] = []
    total = 0

    def visit(folder: str, prefix: str, top: bool) -> None:
        nonlocal total
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            if top and entry.name in SKIPPED:
                continue
            if len(found) >= MAX_ENTRIES:
                raise TooLarge
            info = entry.stat(follow_symlinks=False)
            found.append((entry.path, prefix + entry.name, info))
            if stat.S_ISDIR(info.st_mode):
                visit(entry.path, f"{prefix}{entry.name}/", False)
            elif stat.S_ISREG(info.st_mode):
                total += info.st_size
                if total > limit:
                    raise TooLarge

    visit(os.fspath(TMP), "", True)
    return found


class SmallTar:
    """Tars a small ``/tmp`` for the inline save: the bytes ``tarfile`` writes, faster."""

    def __init__(self) -> None:
        self._headers: dict[tuple[Any, ...], tuple[bytes, int]] = {}
        """Header and content size per entry of the last tar, by name and ``lstat``."""
        self._users: dict[int, str] = {}
        self._groups: dict[int, str] = {}

    def tar(self, limit: int) -> bytes:
        """The tar of ``/tmp``; raises :class:`TooLarge` past ``limit`` bytes or
        :data:`MAX_ENTRIES` entries, ``OSError`` for an entry that cannot be read."""
        found = _small_tree(limit)
        if not found:
            self._headers = {}
            return EMPTY_TAR  # and tarfile stays unloaded (see the module's docstring)
        # Here, in the thread saving: an import that fails (no file descriptor left) fails
        # this save, as an unreadable entry does.
        import tarfile

        out = Capped(limit)
        headers: dict[tuple[Any, ...], tuple[bytes, int]] = {}
        inodes: dict[tuple[int, int], str] = {}
        for path, name, info in found:
            key = (
                name,
                info.st_mode,
                info.st_ino,
                info.st_dev,
                info.st_nlink,
                info.st_uid,
                info.st_gid,
                info.st_size,
                info.st_mtime_ns,
                info.st_ctime_ns,
                info.st_rdev,
            )
            linked = stat.S_ISREG(info.st_mode) and info.st_nlink > 1
            known = None if linked else self._headers.get(key)
            if known is None:
                member = self._member(path, name, info, inodes)
                if member is None:
                    continue  # a socket: tarfile leaves it out too
                size = member.size if member.isreg() else 0
                known = (member.tobuf(tarfile.DEFAULT_FORMAT, tarfile.ENCODING, _ERRORS), size)
            if not linked:
                # A header depends on nothing but the name and the lstat it was built from
                # (a symlink's target cannot change without a new inode and ctime).
                headers[key] = known
            header, size = known
            out.write(header)
            if size:
                out.write(_content(path, name, info, size))
                if remainder := size % tarfile.BLOCKSIZE:
                    out.write(tarfile.NUL * (tarfile.BLOCKSIZE - remainder))
        out.write(tarfile.NUL * (2 * tarfile.BLOCKSIZE))
        if remainder := out.tell() % tarfile.RECORDSIZE:
            out.write(tarfile.NUL * (tarfile.RECORDSIZE - remainder))
        self._headers = headers
        return out.getvalue()

    def _member(
        self, path: str, name: str, info: os.stat_result, inodes: dict[tuple[int, int], str]
    ) -> tarfile.TarInfo | None:
        """What ``TarFile.gettarinfo`` makes of ``info`` (an lstat of ``path``)."""
        import tarfile  # loaded by tar(), the one caller

        mode = info.st_mode
        member = tarfile.TarInfo(name)
        if stat.S_ISREG(mode):
            inode = (info.st_ino, info.st_dev)
            if info.st_nlink > 1 and inode in inodes and inodes[inode] != name:
                member.type, member.linkname = tarfile.LNKTYPE, inodes[inode]
            else:
                member.type = tarfile.REGTYPE
                if inode[0]:
                    inodes[inode] = name
        elif stat.S_ISDIR(mode):
            member.type = tarfile.DIRTYPE
        elif stat.S_ISFIFO(mode):
            member.type = tarfile.FIFOTYPE
        elif stat.S_ISLNK(mode):
            member.type, member.linkname = tarfile.SYMTYPE, os.readlink(path)
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            member.type = tarfile.CHRTYPE if stat.S_ISCHR(mode) else tarfile.BLKTYPE
            member.devmajor, member.devminor = os.major(info.st_rdev), os.minor(info.st_rdev)
        else:
            return None
        member.mode = mode
        member.uid, member.gid = info.st_uid, info.st_gid
        member.size = info.st_size if member.type == tarfile.REGTYPE else 0
        member.mtime = info.st_mtime
        member.uname = _name(self._users, info.st_uid, lambda uid: pwd.getpwuid(uid)[0])
        member.gname = _name(self._groups, info.st_gid, lambda gid: grp.getgrgid(gid)[0])
        return member


def _content(path: str, name: str, info: os.stat_result, size: int) -> bytes:
    """The ``size`` bytes of the regular file ``info`` (an lstat of ``path``) describes.

    ``/tmp`` may change under the save (a process the code left running): the name may be a
    FIFO by now, whose plain ``open`` waits for a writer forever, or a symlink to another file.
    So it is opened without following a link and without blocking, and read only when it is
    still that very file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise OSError(f"/tmp/{name} changed while it was saved ({exc.strerror})") from exc
    with open(fd, "rb") as file:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_ino, now.st_dev) != (
            info.st_ino,
            info.st_dev,
        ):
            raise OSError(f"/tmp/{name} was replaced while it was saved")
        data = file.read(size)
    if len(data) != size:
        raise OSError(f"/tmp/{name} shrank while it was saved")
    return data


def _name(known: dict[int, str], number: int, look_up: Any) -> str:
    """The name of a user or group (as tarfile writes it: "" when it has none), remembered."""
    if (name := known.get(number)) is None:
        try:
            name = str(look_up(number))
        except KeyError:
            name = ""
        if len(known) < MAX_NAMES:
            known[number] = name
    return name
