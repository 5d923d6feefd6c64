"""Loading a saved state back into a fresh sandbox of its session: the namespace and ``/tmp``.

A state is all or nothing: on any error the namespace is left exactly as it was and the reason
is returned (the host then deletes the state and the session starts fresh). Formats 1 to 3 load
(see ``_snapshot`` and ``_pickling`` for how they are made).

A new session's state is empty: its sandbox loads nothing, and never imports :mod:`tarfile` and
:mod:`shutil` (~0.9 MiB with the ``bz2`` and ``lzma`` shutil imports), which only a state that
holds something needs.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
from collections.abc import Callable
from typing import Any

from bridge_protocol.hints import HINT_LENGTH as _HINT_LENGTH
from bridge_protocol.hints import STATE_MAGIC as MAGIC
from bridge_protocol.hints import STATE_MAGIC_1 as MAGIC_1
from bridge_protocol.hints import STATE_MAGIC_3 as MAGIC_3
from bridge_protocol.hints import hint_from_head

from bridge_sandbox_client import _tmpfiles
from bridge_sandbox_client._pickling import COUNT, LENGTH, Unpickler

__all__ = ["restore_state", "state_hint"]


def state_hint(head: bytes | bytearray) -> list[str] | None:
    """The modules named by the hint at the start of a state (``head``: its first bytes); None
    when ``head`` is too short to tell, [] for a state without one (format 1, or not a state)."""
    return hint_from_head(head, strict=False)


def _pickle_start(data: bytes | bytearray) -> int | str:
    """Where the pickle's u64 length is in ``data``, or why ``data`` is not a saved state."""
    if data.startswith(MAGIC_1):
        return len(MAGIC_1)
    if not data.startswith((MAGIC, MAGIC_3)) or len(data) < len(MAGIC) + _HINT_LENGTH.size:
        return "it is not a saved session state (wrong format marker)"
    hint: int = _HINT_LENGTH.unpack_from(data, len(MAGIC))[0]
    return len(MAGIC) + _HINT_LENGTH.size + hint


def restore_state(
    data: bytes | bytearray,
    namespace: dict[str, Any],
    keep: Callable[[str, Any], bool] | None = None,
) -> str:
    """Load a saved state into ``namespace`` and ``/tmp``; return "" or why it was refused.

    All or nothing for the namespace: on any error it is left exactly as it was. With ``keep``
    (a checkpoint brought back into a running sandbox), the state *replaces* the namespace and
    ``/tmp``: every name but the dunders and those ``keep`` accepts (what a state never holds:
    ``runtime``, ``mcp_servers``) is removed, in place (functions of the session keep it as their
    globals), and so is every file of ``/tmp``, once the state has loaded.
    """
    if not data:
        return "" if keep is None else "it is empty"
    try:
        # Here, in the thread loading: an import that fails (no file descriptor left) refuses
        # this state, with nothing changed, as any state that cannot load.
        import shutil
        import tarfile
    except Exception as exc:
        return f"it could not be loaded ({type(exc).__name__}: {str(exc)[:300]})"
    at = _pickle_start(data)
    if isinstance(at, str):
        return at
    if len(data) < at + LENGTH.size:
        return "it is truncated"
    (length,) = LENGTH.unpack_from(data, at)
    start = at + LENGTH.size
    if start + length > len(data):
        return "it is truncated"
    buffers = _buffers(data, start + length) if data.startswith(MAGIC_3) else ([], start + length)
    if isinstance(buffers, str):
        return buffers
    before = dict(namespace)
    # A bytes state is read where it is (BytesIO shares it): no copy of hundreds of MB.
    stream = io.BytesIO(data)
    stream.seek(start)
    try:
        values = Unpickler(stream, namespace, buffers[0]).load()
        if not isinstance(values, dict):
            raise pickle.UnpicklingError(f"expected a dict of names, got {type(values).__name__}")
        if stream.tell() != start + length:
            raise pickle.UnpicklingError("the pickle does not end where its length says")
        if keep is not None:
            for name in [n for n, v in namespace.items() if not _kept(n, v, keep)]:
                del namespace[name]
            _empty_tmp(shutil.rmtree)
        namespace.update(values)
        stream.seek(buffers[1])
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            tar.extractall(_tmpfiles.TMP, filter="tar")
    except Exception as exc:
        namespace.clear()
        namespace.update(before)
        return f"it could not be loaded ({type(exc).__name__}: {str(exc)[:300]})"
    return ""


def _kept(name: str, value: Any, keep: Callable[[str, Any], bool]) -> bool:
    return (name.startswith("__") and name.endswith("__")) or keep(name, value)


def _empty_tmp(rmtree: Callable[[str], object]) -> None:
    with os.scandir(_tmpfiles.TMP) as listing:
        entries = list(listing)
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _buffers(data: bytes | bytearray, at: int) -> tuple[list[bytearray], int] | str:
    """The out-of-band buffers of a format-3 state whose table starts at ``at`` (each a copy
    of its own: the arrays built on them must be writable and must not keep the whole state
    alive), and where the tar starts; or why the state is not whole."""
    if len(data) < at + COUNT.size:
        return "it is truncated"
    (count,) = COUNT.unpack_from(data, at)
    at += COUNT.size
    if len(data) < at + count * LENGTH.size:
        return "it is truncated"
    lengths = [LENGTH.unpack_from(data, at + i * LENGTH.size)[0] for i in range(count)]
    at += count * LENGTH.size
    if at + sum(lengths) > len(data):
        return "it is truncated"
    view = memoryview(data)
    buffers = []
    for length in lengths:
        buffers.append(bytearray(view[at : at + length]))
        at += length
    return buffers, at
