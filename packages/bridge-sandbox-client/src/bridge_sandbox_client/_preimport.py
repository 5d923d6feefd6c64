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
import re
import sys
from collections.abc import Callable, Iterable

__all__ = ["MAX_HINT_BYTES", "MAX_HINT_MODULES", "decode_hint", "encode_hint", "import_modules"]

MAX_HINT_BYTES = 2048
"""Largest hint written or read (a session's data rarely comes from more than ten packages)."""
MAX_HINT_MODULES = 64
"""Most module names written or read."""
NEEDLESS = frozenset({"builtins", "__main__", "copyreg", "_codecs", "cloudpickle"})
"""Roots every sandbox has loaded before it restores anything: never worth a hint."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
SWITCH_INTERVAL = 0.0005
"""The GIL switch interval while importing (default 5 ms): the reader thread, which receives the
rest of the state meanwhile, gets the GIL back within this after each of its socket reads."""


def encode_hint(modules: Iterable[str]) -> bytes:
    """The hint for ``modules`` (dotted names, any order, repeats allowed): their roots, once
    each, in first-seen order, cut to the limits."""
    roots: list[str] = []
    size = 0
    for module in modules:
        root = module.partition(".")[0]
        if root in NEEDLESS or root in roots or not _NAME.fullmatch(root):
            continue
        size += len(root) + 1
        if size > MAX_HINT_BYTES or len(roots) == MAX_HINT_MODULES:
            break
        roots.append(root)
    return "\n".join(roots).encode("ascii")


def decode_hint(raw: bytes) -> list[str]:
    """The module names of a hint read from a state (bounded; anything odd is dropped)."""
    names = []
    for part in raw[:MAX_HINT_BYTES].split(b"\n")[:MAX_HINT_MODULES]:
        name = part.decode("ascii", "replace")
        if _NAME.fullmatch(name) and name not in NEEDLESS:
            names.append(name)
    return names


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
