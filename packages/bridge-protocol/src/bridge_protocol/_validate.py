"""The ONE place where decoded CBOR becomes typed messages, and messages become wire maps.

Everything named ``untrusted_*`` came off the wire and has not been checked yet. Each message
class is compiled once, from its type hints, into a list of field checkers; decoding runs them on
the untrusted map, encoding runs the same rules on the outgoing message so that a sender learns
about a value the peer would refuse before sending it.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from bridge_protocol.errors import InvalidMessage, MalformedFrame, UnknownMessageKind
from bridge_protocol.messages import MESSAGE_TYPES, ErrorInfo, Fault, JSONValue, Message

__all__ = ["MAX_UINT", "MIN_INT", "check_json_value", "message_from_untrusted", "message_to_wire"]

MAX_UINT = 2**64 - 1
"""The largest integer CBOR carries without a (forbidden) bignum tag."""
MIN_INT = -(2**64)
"""The smallest integer CBOR carries without a (forbidden) bignum tag."""

_Checker = Callable[[object, str], Any]
"""``(untrusted value, where) -> validated value``; raises ``MalformedFrame`` naming ``where``."""

_RECORDS = (ErrorInfo, Fault)
"""Dataclasses that appear as fields of messages (nested maps on the wire)."""


# --- scalar checkers ------------------------------------------------------------------------------


def _uint(untrusted: object, where: str) -> int:
    if isinstance(untrusted, bool) or not isinstance(untrusted, int):
        raise MalformedFrame(f"{where}: expected an unsigned integer, got {_type_name(untrusted)}")
    if not 0 <= untrusted <= MAX_UINT:
        raise MalformedFrame(f"{where}: {untrusted} is outside 0..2**64-1")
    return int(untrusted)


def _number(untrusted: object, where: str) -> float:
    if isinstance(untrusted, bool) or not isinstance(untrusted, (int, float)):
        raise MalformedFrame(f"{where}: expected a number, got {_type_name(untrusted)}")
    if not math.isfinite(untrusted):
        raise MalformedFrame(f"{where}: number must be finite")
    return float(untrusted)


def _exact(kind: type) -> _Checker:
    def check(untrusted: object, where: str) -> object:
        if not isinstance(untrusted, kind):
            raise MalformedFrame(f"{where}: expected {kind.__name__}, got {_type_name(untrusted)}")
        return untrusted

    return check


def _type_name(value: object) -> str:
    return type(value).__name__


# --- JSON-like values -----------------------------------------------------------------------------


_PLAIN_SCALARS = frozenset({type(None), bool, int, float, str, bytes})


def _is_plain_json(value: object, depth: int, max_depth: int) -> bool:
    """True if ``value`` is made of exactly the types CBOR decodes to, within depth and 64 bits.

    The fast path of validation: it builds no paths for error messages (that cost ~2 µs per item)
    and walks one nesting level at a time, so it neither recurses nor loops on a cyclic value (the
    depth bound ends it). Exact types, so that an ``int`` or ``str`` subclass takes the slow path
    and is converted to the plain value the peer will decode.
    """
    level: list[Any] = [value]
    while level:
        children: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is int:
                if not MIN_INT <= item <= MAX_UINT:
                    return False
            elif kind is dict:
                if depth > max_depth:
                    return False
                for key in item:
                    if type(key) is not str:
                        return False
                children.extend(item.values())
            elif kind is list:
                if depth > max_depth:
                    return False
                children.extend(item)
            elif kind not in _PLAIN_SCALARS:
                return False
        level = children
        depth += 1
    return True


def check_json_value(untrusted: object, where: str) -> JSONValue:
    """Validate a decoded JSON-like value: None, bool, int, float, str, bytes, list, dict[str, ...].

    Never recurses, so a decoder configured with a very large ``max_depth`` cannot overflow it.
    """
    if _is_plain_json(untrusted, 0, sys.maxsize):
        return untrusted
    stack: list[tuple[object, str]] = [(untrusted, where)]
    while stack:  # slow path: find the offending value to name it
        value, path = stack.pop()
        if isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise MalformedFrame(f"{path}: map keys must be text, got {_type_name(k)}")
                stack.append((v, f"{path}.{k}"))
        elif type(value) not in _PLAIN_SCALARS:
            raise MalformedFrame(f"{path}: {_type_name(value)} is not a JSON-like value")
    raise MalformedFrame(f"{where}: not a JSON-like value")  # pragma: no cover - fast path agrees


def _json_map(untrusted: object, where: str) -> JSONValue:
    if not isinstance(untrusted, dict):
        raise MalformedFrame(f"{where}: expected a map, got {_type_name(untrusted)}")
    return check_json_value(untrusted, where)


def _json_to_wire(value: object, where: str, depth: int, max_depth: int) -> object:
    """An outgoing JSON-like value as plain CBOR-ready data (tuples → lists, mappings → dicts).

    ``depth`` is the nesting level ``value`` sits at if it is a container. Plain values (the
    common case) are returned as they are, without a copy.
    """
    if _is_plain_json(value, depth, max_depth):
        return value
    return _convert_json(value, where, depth, max_depth)


def _convert_json(value: object, where: str, depth: int, max_depth: int) -> object:
    if value is None or type(value) in (bool, str, bytes, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not MIN_INT <= value <= MAX_UINT:
            raise InvalidMessage(f"{where}: integer {value} does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple, Mapping)):
        if depth > max_depth:
            raise InvalidMessage(f"{where}: nested deeper than {max_depth} levels")
        if isinstance(value, Mapping):
            wire: dict[str, object] = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise InvalidMessage(f"{where}: map keys must be text, got {_type_name(k)}")
                wire[str.__str__(k)] = _convert_json(v, f"{where}.{k}", depth + 1, max_depth)
            return wire
        return [
            _convert_json(v, f"{where}[{i}]", depth + 1, max_depth) for i, v in enumerate(value)
        ]
    raise InvalidMessage(f"{where}: {_type_name(value)} is not a JSON-like value")


# --- compiled message schemas ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    check: _Checker
    required: bool
    json: bool
    """Holds a JSON-like value (``JSONValue`` or a mapping of them): converted on encode."""


def _checker_for(hint: Any) -> _Checker:
    origin = typing.get_origin(hint)
    if hint is Any:  # JSONValue
        return check_json_value
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        inner_check = _checker_for(inner)

        def optional(untrusted: object, where: str) -> Any:
            return None if untrusted is None else inner_check(untrusted, where)

        return optional
    if origin is Literal:
        choices = typing.get_args(hint)

        def literal(untrusted: object, where: str) -> object:
            if not isinstance(untrusted, str) or untrusted not in choices:
                raise MalformedFrame(f"{where}: {untrusted!r:.80} is not one of {choices}")
            return untrusted

        return literal
    if origin is tuple:
        item_check = _checker_for(typing.get_args(hint)[0])

        def array(untrusted: object, where: str) -> tuple[Any, ...]:
            if not isinstance(untrusted, (list, tuple)):
                raise MalformedFrame(f"{where}: expected an array, got {_type_name(untrusted)}")
            return tuple(item_check(v, f"{where}[{i}]") for i, v in enumerate(untrusted))

        return array
    if origin in (Mapping, dict):
        return _json_map
    if hint in _RECORDS:
        return lambda untrusted, where: _record_from_map(untrusted, hint, where)
    if hint is int:
        return _uint
    if hint is float:
        return _number
    if hint in (str, bytes, bool):
        return _exact(hint)
    raise TypeError(f"no wire rule for field type {hint!r}")  # a schema bug, found at import


def _compile(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        _Field(
            name=f.name,
            check=_checker_for(hints[f.name]),
            required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            json=hints[f.name] is Any or typing.get_origin(hints[f.name]) in (Mapping, dict),
        )
        for f in dataclasses.fields(cls)
    )


_SCHEMAS: dict[type, tuple[_Field, ...]] = {
    cls: _compile(cls) for cls in (*_RECORDS, *MESSAGE_TYPES.values())
}


def _record_from_map(
    untrusted: object, cls: type, where: str, *, allowed: str | None = None
) -> Any:
    if not isinstance(untrusted, dict):
        raise MalformedFrame(f"{where}: expected a map, got {_type_name(untrusted)}")
    fields = _SCHEMAS[cls]
    kwargs: dict[str, Any] = {}
    for f in fields:
        if f.name in untrusted:
            kwargs[f.name] = f.check(untrusted[f.name], f"{where}.{f.name}")
        elif f.required:
            raise MalformedFrame(f"{where}: missing field {f.name!r}")
    if len(untrusted) != len(kwargs) + (allowed is not None and allowed in untrusted):
        known = {f.name for f in fields} | {allowed}
        unknown = sorted(repr(k)[:64] for k in untrusted if k not in known)
        raise MalformedFrame(f"{where}: unknown field(s) {', '.join(unknown)}")
    return cls(**kwargs)


def message_from_untrusted(untrusted: object, *, accept: Collection[str] | None = None) -> Message:
    """Validate a decoded CBOR value into a typed message, or raise a ``ProtocolError``.

    ``accept`` limits the kinds allowed (a direction); any other kind is ``UnknownMessageKind``.
    """
    if not isinstance(untrusted, dict):
        raise MalformedFrame(f"a frame must hold one CBOR map, got {_type_name(untrusted)}")
    untrusted_kind = untrusted.get("kind")
    if not isinstance(untrusted_kind, str):
        raise MalformedFrame("frame has no text 'kind'")
    cls = MESSAGE_TYPES.get(untrusted_kind)
    if cls is None or (accept is not None and untrusted_kind not in accept):
        raise UnknownMessageKind(f"unexpected message kind {untrusted_kind[:64]!r}")
    message: Message = _record_from_map(untrusted, cls, untrusted_kind, allowed="kind")
    return message


def _record_to_wire(record: object, where: str, depth: int, max_depth: int) -> dict[str, object]:
    if depth > max_depth:
        raise InvalidMessage(f"{where}: nested deeper than {max_depth} levels")
    wire: dict[str, object] = {}
    for f in _SCHEMAS[type(record)]:
        value = getattr(record, f.name)
        path = f"{where}.{f.name}"
        if f.json:
            if f.check is _json_map and not isinstance(value, Mapping):
                raise InvalidMessage(f"{path}: expected a map, got {_type_name(value)}")
            wire[f.name] = _json_to_wire(value, path, depth + 1, max_depth)
            continue
        nested = type(value) in _RECORDS
        if nested:
            value = _record_to_wire(value, path, depth + 1, max_depth)
        elif isinstance(value, tuple) and depth + 1 > max_depth:
            raise InvalidMessage(f"{path}: nested deeper than {max_depth} levels")
        try:
            checked = f.check(value, path)
        except MalformedFrame as exc:
            raise InvalidMessage(str(exc)) from None
        # Store what the check returned (plain int/float/str, lists for tuples) so that int or str
        # subclasses such as ErrorCode are encoded as the plain values the peer will decode.
        wire[f.name] = value if nested else list(checked) if isinstance(checked, tuple) else checked
    return wire


def message_to_wire(message: Message, *, max_depth: int) -> dict[str, object]:
    """The CBOR map for ``message``: ``{"kind": KIND, <field>: <value>, ...}``, validated.

    Raises :class:`InvalidMessage` if the peer would refuse the result: a field of the wrong type,
    a value that is not JSON-like, an integer beyond 64 bits, or nesting deeper than ``max_depth``
    (counted like the decoder: the message map itself is level 1).
    """
    cls = type(message)
    kind = getattr(cls, "KIND", None)
    if not isinstance(kind, str) or MESSAGE_TYPES.get(kind) is not cls:
        raise InvalidMessage(f"{cls.__name__} is not a protocol message")
    return {"kind": kind, **_record_to_wire(message, kind, 1, max_depth)}
