"""Reading a file a user or a client wrote (a client's config, the servers file, bridge.toml):
a regular file only, bounded, checked as opened.

Such a path can name anything: a FIFO would hang the reader (opening it blocks until a writer
comes), a device such as ``/dev/zero`` would be read without end, and a file checked with
``stat`` first can be swapped before it is read. So the file is opened without blocking, its
type is read from the open descriptor, and at most ``limit + 1`` bytes are read: a file that
grew past the limit after any earlier look is refused all the same. A symlink is followed (a
user's dotfiles are often links); whether its folders may be trusted is the caller's question.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["NotARegularFile", "TooLarge", "read_regular"]

_CHUNK = 64 * 1024


class NotARegularFile(OSError):
    """The path names a FIFO, a device, a socket or a directory."""


class TooLarge(OSError):
    """The file holds more than the reader's limit."""


def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (at most ``limit``), None when there is none.

    Raises :class:`NotARegularFile`, :class:`TooLarge`, or another :class:`OSError` (no
    permission, an I/O error); blocking, as file reads are.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise TooLarge(f"{path} is larger than {limit} bytes")
    return data
