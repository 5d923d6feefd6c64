"""Tracebacks cut to what the user can fix: their own frames, and where their code entered a
library, one frame of it.

A frame is the user's (a ``<cell N>``, or a file outside the interpreter's own and installed
packages, such as a module written to /tmp), a library's (the standard library, site- or
dist-packages), or plumbing that is never shown: this package, the runner before the first cell,
and the event loop and futures machinery (asyncio, concurrent.futures) a call waits through. A run
of library frames is cut to its last one: where the error was raised, or where the library called
back into user code.

An error that comes from trying to reach the network says, on one line after the traceback, that
the sandbox has none by design and what to use instead.
"""

from __future__ import annotations

import errno
import os
import socket
import traceback
from traceback import FrameSummary, StackSummary, TracebackException

from bridge_protocol import ErrorInfo

__all__ = [
    "CELL_PREFIX",
    "MAX_TRACEBACK_CHARS",
    "NO_NETWORK_HINT",
    "error_info",
    "interrupted_info",
    "wire_text",
]

CELL_PREFIX = "<cell "
"""Filenames of user code start with this (``<cell 3>`` is the third execution)."""
MAX_TRACEBACK_CHARS = 64 * 1024
NO_NETWORK_HINT = (
    "[no network] The sandbox has no network, by design: call the user's MCP servers through "
    "mcp_servers instead (await runtime.discovered_servers() lists them)."
)
"""The line added after the traceback of an error that comes from a network attempt."""
_MAX_MESSAGE_CHARS = 16 * 1024
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGES = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


_STDLIB_DIRS: list[tuple[tuple[str, ...], tuple[str, ...]]] = []


def _stdlib() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The standard library's directories, and its plumbing's (asyncio, concurrent): found when
    the first traceback is shaped, as :mod:`sysconfig` and its build data (~0.5 MiB) would
    otherwise be held by every idle sandbox. If that import fails (no file descriptor left, a
    user's ``sysconfig`` module), frames are judged without them this time, and asked again
    next time."""
    if not _STDLIB_DIRS:
        try:
            import sysconfig

            stdlib = tuple(
                dict.fromkeys(
                    os.path.abspath(path) + os.sep
                    for key in ("stdlib", "platstdlib")
                    if (path := sysconfig.get_paths().get(key))
                )
            )
        except Exception:  # a traceback must still be shaped: it is the user's result
            return (), ()
        plumbing = tuple(
            root + name + os.sep for root in stdlib for name in ("asyncio", "concurrent")
        )
        _STDLIB_DIRS.append((stdlib, plumbing))
    return _STDLIB_DIRS[0]


_NETWORK_ERRNOS = frozenset(
    {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.ECONNREFUSED}
)
"""What connecting fails with under ``--network=none``: only loopback exists there."""

_USER, _LIBRARY, _HIDDEN = "user", "library", "hidden"


def _kind(frame: FrameSummary) -> str:
    name = frame.filename or ""
    if name.startswith(CELL_PREFIX):
        return _USER
    if name.startswith("<frozen "):
        return _HIDDEN  # the import machinery between an import statement and the module
    if name.startswith("<"):
        return _USER  # exec()'d or compiled by the user's code
    path = os.path.abspath(name)
    stdlib, plumbing = _stdlib()
    if path.startswith((_OURS, *plumbing)):
        return _HIDDEN
    if path.startswith(stdlib) or any(marker in path for marker in _PACKAGES):
        return _LIBRARY
    return _USER


def _bare(frame: FrameSummary) -> FrameSummary:
    """A library frame on one line: its source line, without the multi-line statement and the
    carets, which point inside code the user did not write."""
    return FrameSummary(
        frame.filename, frame.lineno, frame.name, lookup_line=False, line=frame.line
    )


def _trim(stack: StackSummary) -> StackSummary:
    frames = list(stack)
    first_cell = next((i for i, f in enumerate(frames) if f.filename.startswith(CELL_PREFIX)), None)
    if first_cell is not None:
        # Everything before the first user frame is the runner: asyncio and this package.
        frames = frames[first_cell:]
    kept: list[FrameSummary] = []
    library: FrameSummary | None = None  # the last frame of the library run under way
    for frame in frames:
        kind = _kind(frame)
        if kind == _LIBRARY:
            library = frame
        elif kind == _USER:
            if library is not None:
                kept.append(_bare(library))
                library = None
            kept.append(frame)
    if library is not None:
        kept.append(_bare(library))
    return StackSummary.from_list(kept)


def _trim_all(te: TracebackException, exc: BaseException | None, seen: set[int]) -> None:
    """Trim every traceback of the chain; ``exc`` is the exception ``te`` was made from."""
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = _trim(te.stack)
    if exc is not None and te.__context__ is not None and _restated(exc, te.__context__):
        te.__context__ = None
    cause, context = (exc.__cause__, exc.__context__) if exc is not None else (None, None)
    linked = [(te.__cause__, cause), (te.__context__, context)]
    members = getattr(te, "exceptions", None) or ()
    if isinstance(exc, BaseExceptionGroup) and len(members) == len(exc.exceptions):
        linked += zip(members, exc.exceptions, strict=True)
    else:
        linked += [(member, None) for member in members]
    for linked_te, linked_exc in linked:
        if linked_te is not None:
            _trim_all(linked_te, linked_exc, seen)


def _restated(exc: BaseException, context: TracebackException) -> bool:
    """Whether the implicit context of ``exc`` says nothing it does not: a library caught an
    error in its own code and raised another that quotes it (urllib's ``URLError`` quotes the
    ``socket.gaierror``). Then the context is only more library frames."""
    inner = exc.__context__
    if exc.__cause__ is not None or inner is None:
        return False
    if any(_kind(frame) == _USER for frame in context.stack):
        return False
    said = _message(inner)
    return bool(said) and said in _message(exc)


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, (socket.gaierror, ConnectionRefusedError)):
        return True
    return isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS


def _from_network(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it wraps, is a failed attempt to resolve or reach a host."""
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if _is_network_error(current):
            return True
        # ``reason``: urllib.error.URLError keeps the socket error there. Read from the instance
        # dict: an attribute lookup on a user's exception could run its code.
        linked = [current.__cause__, current.__context__, vars(current).get("reason")]
        if isinstance(current, BaseExceptionGroup):
            linked += current.exceptions
        pending += [e for e in linked if isinstance(e, BaseException)]
    return False


def _type_name(exc_type: type[BaseException]) -> str:
    if exc_type.__module__ in ("builtins", "__main__"):
        return exc_type.__qualname__
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


def wire_text(text: str) -> str:
    """``text`` without lone surrogates, which CBOR text (UTF-8) cannot carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _cap(text: str, limit: int) -> str:
    text = wire_text(text)
    if len(text) <= limit:
        return text
    # The end of a traceback (the failing frame and the message) matters most.
    return f"[... {len(text) - limit} characters of traceback omitted ...]\n" + text[-limit:]


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception as str_failed:  # user __str__ may raise anything
        text = f"<exception str() failed: {type(str_failed).__name__}>"
    return wire_text(text[:_MAX_MESSAGE_CHARS])


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe a user-code exception, with its traceback cut to what the user can fix (see the
    module docstring) and, for a network attempt, :data:`NO_NETWORK_HINT` after it."""
    te = TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    _trim_all(te, exc, set())
    text = "".join(te.format())
    if _from_network(exc):
        text += NO_NETWORK_HINT + "\n"
    return ErrorInfo(
        type=_type_name(type(exc)),
        message=_message(exc),
        traceback=_cap(text, MAX_TRACEBACK_CHARS),
    )


def interrupted_info(exc: BaseException | None) -> ErrorInfo:
    """A KeyboardInterrupt report; ``exc`` (e.g. the CancelledError) says where code stopped."""
    frames = _trim(traceback.extract_tb(exc.__traceback__)) if exc is not None else None
    text = "KeyboardInterrupt\n"
    if frames:
        text = "Traceback (most recent call last):\n" + "".join(frames.format()) + text
    return ErrorInfo(
        type="KeyboardInterrupt",
        message="execution interrupted",
        traceback=_cap(text, MAX_TRACEBACK_CHARS),
    )
