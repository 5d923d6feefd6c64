"""Tracebacks trimmed to the user's frames: no frame of this package, none of the runner's."""

from __future__ import annotations

import os
import traceback
from traceback import FrameSummary, StackSummary, TracebackException

from bridge_protocol import ErrorInfo

__all__ = ["CELL_PREFIX", "MAX_TRACEBACK_CHARS", "error_info", "interrupted_info", "wire_text"]

CELL_PREFIX = "<cell "
"""Filenames of user code start with this (``<cell 3>`` is the third execution)."""
MAX_TRACEBACK_CHARS = 64 * 1024
_MAX_MESSAGE_CHARS = 16 * 1024
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_ours(frame: FrameSummary) -> bool:
    return os.path.abspath(frame.filename).startswith(_OURS) if frame.filename else False


def _trim(stack: StackSummary) -> StackSummary:
    frames = list(stack)
    first_cell = next((i for i, f in enumerate(frames) if f.filename.startswith(CELL_PREFIX)), None)
    if first_cell is not None:
        # Everything before the first user frame is the runner: asyncio and this package.
        frames = frames[first_cell:]
    return StackSummary.from_list([f for f in frames if not _is_ours(f)])


def _trim_all(te: TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = _trim(te.stack)
    for linked in (te.__cause__, te.__context__):
        if linked is not None:
            _trim_all(linked, seen)
    for member in getattr(te, "exceptions", None) or ():
        _trim_all(member, seen)


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
    """Describe a user-code exception, with its traceback trimmed to user frames."""
    te = TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    _trim_all(te, set())
    text = "".join(te.format())
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
