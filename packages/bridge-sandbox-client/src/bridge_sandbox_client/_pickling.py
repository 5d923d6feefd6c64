"""How a session's namespace is pickled for its saved state, and loaded back.

One cloudpickle of every saveable name (shared references kept), protocol 5 so that numpy and
pandas hand their buffers over uncopied (a capped buffer refuses a large array before its bytes
are copied); names that cannot be pickled are left out and named. A forked child's pickle keeps
the large buffers out of band (:data:`OOB_MIN`): they are stored after it, each on its own, so
that one that did not change since the last state need not be sent again (format 3). While
pickling, the modules the loader will import are recorded (the state's hint, see
``_preimport``). The inline save refuses objects whose class's own code decides how they are
pickled (:class:`SessionHooks`): only a forked child may run that code.
"""

from __future__ import annotations

import copyreg
import pickle
import struct
import types
from collections.abc import Callable
from functools import partial
from typing import Any, BinaryIO

import cloudpickle  # type: ignore[import-untyped]
from bridge_protocol.hints import HINT_LENGTH as _HINT_LENGTH
from bridge_protocol.hints import STATE_MAGIC as MAGIC
from bridge_protocol.hints import STATE_MAGIC_3 as MAGIC_3

from bridge_sandbox_client._preimport import encode_hint
from bridge_sandbox_client._tmpfiles import Capped, TooLarge

__all__ = [
    "COUNT",
    "LENGTH",
    "MAX_UNSAVED",
    "OOB_MIN",
    "Pickled",
    "Unpickler",
    "describe_error",
    "pickle_namespace",
]

MAX_UNSAVED = 50
"""Unsaved names listed in a snapshot (the host keeps as many; each entry is cut too), so that
its last frame always fits the channel, whatever names and types user code makes up."""
_GLOBALS = "__main__-globals"
"""Persistent id of the session namespace itself: functions and classes defined by user code
are restored with the live namespace as their globals, not a private copy of it."""
_PLAIN = frozenset(
    {int, float, complex, bool, str, bytes, bytearray, tuple, list, dict, set, type(None)}
)
"""Types whose objects never name a module (skipped first: a state can hold millions)."""
LENGTH = struct.Struct(">Q")
"""The u64 length of the pickle (and of each out-of-band buffer) in a saved state."""
COUNT = struct.Struct(">I")
"""The u32 count of out-of-band buffers in a format-3 state."""
OOB_MIN = 64 * 1024
"""Buffers of at least this many bytes are kept out of band by a forked child's pickle: numpy
arrays, pandas columns, pyarrow buffers; smaller ones stay in the pickle."""


class SessionHooks(TooLarge):
    """A class of the session's own code decides how its objects are pickled: a forked child
    saves the state, so that such code (which may mutate, hang or exit) never runs in the
    process serving the session, whose live objects it would change."""


_HOOKS = frozenset(
    {
        "__reduce_ex__",
        "__reduce__",
        "__getstate__",
        "__getnewargs_ex__",
        "__getnewargs__",
        "__getattr__",
        "__getattribute__",
        "__class__",
    }
)
"""What the pickler looks up on an object (or its class) and user code can define."""
_CLASS_DICT = type.__dict__["__dict__"].__get__
_CLASS_MRO = type.__dict__["__mro__"].__get__


def _runs_session_code(cls: type) -> bool:
    """Whether pickling an instance of ``cls`` may call a hook defined by the session's code."""
    try:
        if _CLASS_DICT(type(cls)).get("__module__") == "__main__":
            return True  # a metaclass of the session's (it could hash the class, below)
        reducer = copyreg.dispatch_table.get(cls)  # the library's own (complex, re.Pattern)
        if (
            reducer is not None
            and not isinstance(reducer, types.BuiltinFunctionType)
            and (not isinstance(reducer, types.FunctionType) or reducer.__module__ == "__main__")
        ):
            return True
        for klass in _CLASS_MRO(cls):
            attributes = _CLASS_DICT(klass)  # never a metaclass's __dict__ or __module__
            if attributes.get("__module__") == "__main__" and not _HOOKS.isdisjoint(attributes):
                return True
    except BaseException:  # an odd class: its state is the child's to save
        return True
    return False


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    def __init__(
        self,
        file: BinaryIO,
        namespace: dict[str, Any],
        inline: bool = False,
        buffers: list[memoryview] | None = None,
    ) -> None:
        callback = None if buffers is None else partial(_out_of_band, buffers)
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL, buffer_callback=callback)
        self._inline = inline
        self._checked: dict[type, bool] = {}
        # cloudpickle gives the functions of one module a fresh globals dict, kept here by the
        # id of their real globals: ours is replaced by a marker the loader resolves.
        self._globals = self.globals_ref.setdefault(id(namespace), {"__name__": "__main__"})
        self.needed: dict[str, None] = {}
        """Modules the loader imports: of the modules, classes and functions pickled (those
        pickled by reference are imported by name), in first-seen order."""

    def persistent_id(self, obj: Any) -> str | None:
        # Called for every object pickled: the cheapest place to see what the loader imports.
        if obj is self._globals:
            return _GLOBALS
        cls = type(obj)
        if cls in _PLAIN:
            return None
        if cls is types.ModuleType:
            self.needed[obj.__name__] = None
        elif _by_name(obj) and isinstance(module := getattr(obj, "__module__", None), str):
            self.needed[module] = None
        return None

    def reducer_override(self, obj: Any) -> Any:
        if self._inline:
            cls = type(obj)
            if (hooked := self._checked.get(cls)) is None:
                hooked = self._checked[cls] = _runs_session_code(cls)
            if hooked:
                raise SessionHooks
        return super().reducer_override(obj)


def _out_of_band(buffers: list[memoryview], buffer: pickle.PickleBuffer) -> bool:
    """The pickler's ``buffer_callback``: keep a large contiguous buffer out of band (False),
    anything else in the pickle (True)."""
    try:
        view = buffer.raw()
    except BufferError:  # not contiguous: the pickle copies it
        return True
    if view.nbytes < OOB_MIN:
        return True
    buffers.append(view)
    return False


def _by_name(obj: Any) -> bool:
    """Whether ``obj`` is a class or a function: what a pickle imports by name. An instance
    (which has no ``__qualname__`` of its own) does not count: its own type may never be imported
    at all (its reduce names what it is rebuilt from)."""
    return isinstance(obj, type) or (
        callable(obj) and isinstance(getattr(obj, "__qualname__", None), str)
    )


class Unpickler(pickle.Unpickler):
    def __init__(
        self, file: BinaryIO, namespace: dict[str, Any], buffers: list[bytearray] | None = None
    ) -> None:
        super().__init__(file, buffers=buffers)
        self._namespace = namespace

    def persistent_load(self, pid: Any) -> Any:
        if pid != _GLOBALS:
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self._namespace


class Pickled:
    """The pickle of a namespace's saveable names, and what it needs and left out.

    A saved state is :meth:`header`, the pickle, :meth:`table`, the out-of-band buffers one
    after the other, then the tar of ``/tmp``. Without out-of-band buffers it is format 2 (no
    table); with them, format 3: the table is their u32 count and each one's u64 length.
    """

    __slots__ = ("buffers", "data", "hint", "unsaved")

    def __init__(
        self, data: bytes, hint: bytes, buffers: list[memoryview], unsaved: list[str]
    ) -> None:
        self.data = data
        self.hint = hint
        self.buffers = buffers
        self.unsaved = unsaved

    def header(self) -> bytes:
        """What precedes the pickle in a saved state."""
        magic = MAGIC_3 if self.buffers else MAGIC
        return magic + _HINT_LENGTH.pack(len(self.hint)) + self.hint + LENGTH.pack(len(self.data))

    def table(self) -> bytes:
        """What follows the pickle: the out-of-band buffers' count and lengths (b"" if none)."""
        if not self.buffers:
            return b""
        lengths = b"".join(LENGTH.pack(view.nbytes) for view in self.buffers)
        return COUNT.pack(len(self.buffers)) + lengths


def _dumps(
    values: dict[str, Any], namespace: dict[str, Any], limit: int | None = None, oob: bool = False
) -> tuple[bytes, bytes, list[memoryview]]:
    """The pickle of ``values``, its hint and (``oob``) its out-of-band buffers."""
    # Protocol 5: numpy and pandas hand their buffers over uncopied, so a capped buffer refuses
    # a large array before its bytes are copied.
    buffer = Capped(limit)
    buffers: list[memoryview] = []
    inline = limit is not None
    pickler = _Pickler(buffer, namespace, inline=inline, buffers=buffers if oob else None)
    pickler.dump(values)
    return buffer.getvalue(), encode_hint(pickler.needed), buffers


def _saveable(namespace: dict[str, Any], skip: Callable[[str, Any], bool]) -> dict[str, Any]:
    return {
        name: value
        for name, value in namespace.items()
        if not (name.startswith("__") and name.endswith("__")) and not skip(name, value)
    }


def pickle_namespace(
    namespace: dict[str, Any],
    skip: Callable[[str, Any], bool],
    limit: int | None = None,
    *,
    oob: bool = False,
) -> Pickled:
    """The pickle of every saveable name, with ``"name (type): reason"`` for each left out;
    ``oob``: with large buffers out of band (see :class:`Pickled`).

    Raises :class:`TooLarge` past ``limit`` bytes.
    """
    values = _saveable(namespace, skip)
    try:
        return Pickled(*_dumps(values, namespace, limit, oob), [])
    except TooLarge:
        raise
    except Exception:
        pass
    unsaved: list[str] = []
    for name, value in list(values.items()):
        try:
            _dumps({name: value}, namespace, limit)
        except TooLarge:
            raise
        except Exception as exc:
            del values[name]
            if len(unsaved) < MAX_UNSAVED:
                # Cut: the names and reasons must fit the one frame that ends the snapshot.
                unsaved.append(f"{name[:100]} ({_type_name(value)}): {describe_error(exc)}")
            else:
                unsaved[-1] = "(more names could not be saved either; they are not listed)"
    return Pickled(*_dumps(values, namespace, limit, oob), unsaved)


def describe_error(exc: BaseException) -> str:
    """``"Type: first line"`` of ``exc``, cut; never raises (user code defines ``__str__``)."""
    try:
        text = str(exc).splitlines()[0] if str(exc) else ""
        kind = type(exc).__name__
        return f"{kind}: {text}"[:200] if text else str(kind)[:200]
    except BaseException:  # even its SystemExit: describing it must not end the sandbox
        return "an exception whose message could not be read"


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)[:100]
    except BaseException:  # a metaclass's __name__ property
        return "?"
