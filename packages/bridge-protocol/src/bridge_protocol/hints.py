"""The module hint of a saved session state: which top-level modules loading it will import.

A saved state starts with ``MCPSNAP2`` (or ``MCPSNAP3``), a big-endian u16 length and the hint:
module names, one per line (see docs/protocol.md §3.4). The sandbox writes it, and imports those
modules while the rest of the state arrives. The host reads the same head (never the pickle
after it) to pass the names to a sandbox before the state itself: in a file of the sandbox's
channel directory (:data:`~bridge_protocol.paths.PREIMPORT_FILE_NAME`), which the sandbox client
reads at start.

Both sides treat it as hostile: at most :data:`MAX_HINT_BYTES` and :data:`MAX_HINT_MODULES`, each
name a plain identifier (no dots, paths or spaces). :func:`strict_hint` (the host's reading) drops
the whole hint when any part of it breaks those rules; :func:`lenient_hint` (a sandbox reading
its own session's state) keeps the names that pass.
"""

from __future__ import annotations

import re
import struct

__all__ = [
    "HEAD_SIZE",
    "MAX_HINT_BYTES",
    "MAX_HINT_MODULES",
    "STATE_MAGIC",
    "STATE_MAGIC_1",
    "STATE_MAGIC_3",
    "encode_hint",
    "hint_from_head",
    "hint_length",
    "lenient_hint",
    "strict_hint",
]

STATE_MAGIC = b"MCPSNAP2"
"""Format marker of a saved state (format 2: with its hint)."""
STATE_MAGIC_1 = b"MCPSNAP1"
"""The first format (no hint), still loaded."""
STATE_MAGIC_3 = b"MCPSNAP3"
"""Format 3: format 2's head (the hint at the same place), then numpy/pandas buffers stored
after the pickle (see the sandbox client's ``_pickling``)."""
_HINTED = (STATE_MAGIC, STATE_MAGIC_3)
HINT_LENGTH = struct.Struct(">H")
MAX_HINT_BYTES = 2048
"""Largest hint written or read (a session's data rarely comes from more than ten packages)."""
MAX_HINT_MODULES = 64
"""Most module names written or read."""
HEAD_SIZE = len(STATE_MAGIC) + HINT_LENGTH.size + MAX_HINT_BYTES
"""Bytes of a state that always hold its whole hint."""
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
NEEDLESS = frozenset({"builtins", "__main__", "copyreg", "_codecs", "cloudpickle"})
"""Roots every sandbox has loaded before it restores anything: never worth a hint."""


def hint_length(head: bytes | bytearray | memoryview) -> int | None:
    """The hint's declared length in a state starting with ``head``; None when ``head`` is too
    short to tell, -1 when it is no format-2 state or declares more than the limit."""
    prefix = len(STATE_MAGIC) + HINT_LENGTH.size
    if len(head) < prefix:
        return None if any(magic.startswith(bytes(head)) for magic in _HINTED) else -1
    if bytes(head[: len(STATE_MAGIC)]) not in _HINTED:
        return -1
    (length,) = HINT_LENGTH.unpack_from(head, len(STATE_MAGIC))
    return length if length <= MAX_HINT_BYTES else -1


def hint_from_head(head: bytes | bytearray | memoryview, *, strict: bool) -> list[str] | None:
    """The hint of a state starting with ``head``: None when ``head`` is too short to tell, []
    for a state without one (format 1, not a state, a hint past the limits)."""
    length = hint_length(head)
    if length is None or length < 0:
        return None if length is None else []
    start = len(STATE_MAGIC) + HINT_LENGTH.size
    if len(head) < start + length:
        return None
    raw = bytes(head[start : start + length])
    return strict_hint(raw) if strict else lenient_hint(raw)


def strict_hint(raw: bytes) -> list[str]:
    """The names of ``raw`` (lines), or [] if any line, the count or the size is not allowed."""
    if not raw or len(raw) > MAX_HINT_BYTES:
        return []
    names = raw.split(b"\n")
    if len(names) > MAX_HINT_MODULES or len(set(names)) != len(names):
        return []
    if not all(MODULE_NAME.fullmatch(name.decode("ascii", "replace")) for name in names):
        return []
    return [name.decode("ascii") for name in names if name.decode("ascii") not in NEEDLESS]


def lenient_hint(raw: bytes) -> list[str]:
    """The allowed names of ``raw`` (bounded; anything odd is dropped, the rest kept)."""
    names = []
    for part in raw[:MAX_HINT_BYTES].split(b"\n")[:MAX_HINT_MODULES]:
        name = part.decode("ascii", "replace")
        if MODULE_NAME.fullmatch(name) and name not in NEEDLESS:
            names.append(name)
    return names


def encode_hint(modules: list[str]) -> bytes:
    """The hint naming ``modules`` (roots already), cut to the limits."""
    roots: list[str] = []
    size = 0
    for root in modules:
        if root in NEEDLESS or root in roots or not MODULE_NAME.fullmatch(root):
            continue
        size += len(root) + 1
        if size > MAX_HINT_BYTES or len(roots) == MAX_HINT_MODULES:
            break
        roots.append(root)
    return "\n".join(roots).encode("ascii")
