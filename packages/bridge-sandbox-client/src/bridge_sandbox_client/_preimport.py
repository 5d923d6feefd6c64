"""The modules a saved state needs, named at its head, so that a restoring sandbox imports them
while the rest of the state is still arriving.

Unpickling a session that holds numpy and pandas data spends about half its time importing them
(``import pandas`` alone takes ~0.4 s in the sandbox image), which without a hint happens only
once every ``Restore`` frame has arrived. The saving sandbox records the top-level modules its
pickle refers to (the types of what it pickles, the classes and modules it pickles by reference)
in a short header; the restoring sandbox's reader thread hands them to the idle main thread with
the first frame, and the main thread imports them while the reader keeps receiving the rest.

The hint is written by the sandbox itself and read only inside a sandbox of the same session,
like the pickle after it (which can import anything it names anyway); it is still bounded (bytes,
count, each a plain identifier) and a name that cannot be imported is skipped: the unpickling
that follows then reports what failed, exactly as without a hint.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable

from bridge_protocol.hints import (
    MAX_HINT_BYTES,
    MAX_HINT_MODULES,
    lenient_hint,
)
from bridge_protocol.hints import encode_hint as _encode_roots
from bridge_protocol.paths import SANDBOX_PREIMPORT_FILE

__all__ = [
    "MAX_HINT_BYTES",
    "MAX_HINT_MODULES",
    "EarlyImports",
    "decode_hint",
    "encode_hint",
    "import_modules",
]

SWITCH_INTERVAL = 0.0005
"""The GIL switch interval while importing (default 5 ms): the reader thread, which receives the
rest of the state meanwhile, gets the GIL back within this after each of its socket reads."""


def encode_hint(modules: Iterable[str]) -> bytes:
    """The hint for ``modules`` (dotted names, any order, repeats allowed): their roots, once
    each, in first-seen order, cut to the limits."""
    return _encode_roots([module.partition(".")[0] for module in modules])


def decode_hint(raw: bytes) -> list[str]:
    """The module names of a hint read from a state (bounded; anything odd is dropped)."""
    return lenient_hint(raw)


class EarlyImports:
    """The modules the host named in the channel directory before this sandbox started: imported
    by a thread from the process's start, while it connects and the host sends the state.

    The main thread :meth:`join`\\ s it before it runs anything (a restore, an execution): no
    import is ever half done under user code or a snapshot's ``fork()``.
    """

    def __init__(self, path: str | None = SANDBOX_PREIMPORT_FILE) -> None:
        self.modules = _read_names(path) if path is not None else []
        self.errors: list[str] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.modules:
            self._thread = threading.Thread(
                target=import_modules,
                args=(self.modules, self.errors.append),
                name="bridge-preimport",
                daemon=True,
            )
            self._thread.start()

    def join(self) -> list[str]:
        """Wait for the imports (at once if none); the failures to log, once."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        errors, self.errors = self.errors, []
        return errors


def _read_names(path: str) -> list[str]:
    # Written by the host, which validated each name; read as hostile all the same.
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_HINT_BYTES + 1)
    except OSError:
        return []
    return lenient_hint(raw) if len(raw) <= MAX_HINT_BYTES else []


def import_modules(names: Iterable[str], log: Callable[[str], None]) -> None:
    """Import each of ``names`` not loaded yet (main thread); one that fails is logged and
    skipped (unpickling reports it, if the state needs it)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        for name in names:
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except BaseException as exc:  # a module's import may raise anything, even exit
                log(f"could not import {name!r} ahead of a restore: {type(exc).__name__}: {exc}")
    finally:
        sys.setswitchinterval(previous)
