"""The ONE place where untrusted decoded CBOR becomes typed messages (and back).

Everything named ``untrusted_*`` came off the wire and has not been checked yet.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, Literal

from bridge_protocol.errors import MalformedFrame, UnknownMessageKind
from bridge_protocol.messages import MESSAGE_TYPES, ErrorInfo, Fault, JSONValue, Message

__all__ = ["message_from_untrusted", "message_to_wire", "check_json_value"]

_NESTED = (ErrorInfo, Fault)
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


def _to_wire(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_to_wire(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_wire(v) for v in value]
    return value


def message_to_wire(message: Message) -> dict[str, Any]:
    """The CBOR map for ``message``: ``{"kind": KIND, <field>: <value>, ...}``."""
    wire = _to_wire(message)
    return {"kind": type(message).KIND, **wire}


def check_json_value(untrusted: object, where: str) -> JSONValue:
    """Validate a JSON-like value (None/bool/int/float/str/bytes/list/dict[str, ...])."""
    stack: list[tuple[object, str]] = [(untrusted, where)]
    while stack:
        value, path = stack.pop()
        if value is None or isinstance(value, (bool, int, str, bytes)):
            continue
        if isinstance(value, float):
            continue
        if isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise MalformedFrame(f"{path}: map keys must be text, got {type(k).__name__}")
                stack.append((v, f"{path}.{k}"))
            continue
        raise MalformedFrame(f"{path}: {type(value).__name__} is not a JSON-like value")
    return untrusted


def _check(untrusted: object, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:  # JSONValue
        return check_json_value(untrusted, where)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if untrusted is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _check(untrusted, non_none[0], where)
        raise MalformedFrame(f"{where}: unsupported union")  # pragma: no cover - schema bug
    if origin is Literal:
        if untrusted not in typing.get_args(hint) or not isinstance(untrusted, str):
            raise MalformedFrame(f"{where}: {untrusted!r} is not one of {typing.get_args(hint)}")
        return untrusted
    if origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if not isinstance(untrusted, list):
            raise MalformedFrame(f"{where}: expected an array")
        return tuple(_check(v, item, f"{where}[{i}]") for i, v in enumerate(untrusted))
    if origin in (Mapping, dict) or hint is Mapping:
        if not isinstance(untrusted, dict):
            raise MalformedFrame(f"{where}: expected a map")
        return check_json_value(untrusted, where)
    if hint in _NESTED:
        return _from_map(untrusted, hint, where)
    if hint is float:
        if isinstance(untrusted, bool) or not isinstance(untrusted, (int, float)):
            raise MalformedFrame(f"{where}: expected a number")
        if not math.isfinite(untrusted):
            raise MalformedFrame(f"{where}: number must be finite")
        return float(untrusted)
    if hint is int:
        if isinstance(untrusted, bool) or not isinstance(untrusted, int):
            raise MalformedFrame(f"{where}: expected an integer")
        return untrusted
    if hint in (str, bytes, bool):
        if not isinstance(untrusted, hint):
            raise MalformedFrame(f"{where}: expected {hint.__name__}")
        return untrusted
    raise MalformedFrame(f"{where}: unsupported field type {hint!r}")  # pragma: no cover


def _from_map(untrusted: object, cls: type, where: str) -> Any:
    if not isinstance(untrusted, dict):
        raise MalformedFrame(f"{where}: expected a map")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in untrusted:
            kwargs[f.name] = _check(untrusted[f.name], hints[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise MalformedFrame(f"{where}: missing field {f.name!r}")
    known = {f.name for f in dataclasses.fields(cls)} | {"kind"}
    unknown = [k for k in untrusted if k not in known]
    if unknown:
        raise MalformedFrame(f"{where}: unknown field(s) {sorted(map(str, unknown))}")
    return cls(**kwargs)


def message_from_untrusted(untrusted: object, *, accept: Collection[str] | None = None) -> Message:
    """Validate a decoded CBOR value into a typed message, or raise a ``ProtocolError``."""
    if not isinstance(untrusted, dict):
        raise MalformedFrame("a frame must hold one CBOR map")
    untrusted_kind = untrusted.get("kind")
    if not isinstance(untrusted_kind, str):
        raise MalformedFrame("frame has no text 'kind'")
    cls = MESSAGE_TYPES.get(untrusted_kind)
    if cls is None or (accept is not None and untrusted_kind not in accept):
        raise UnknownMessageKind(f"unexpected message kind {untrusted_kind[:64]!r}")
    message: Message = _from_map(untrusted, cls, untrusted_kind)
    return message
