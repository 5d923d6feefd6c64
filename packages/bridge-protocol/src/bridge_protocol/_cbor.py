"""The one boundary between cbor2 and this package.

cbor2 is a general-purpose CBOR library: by default it turns semantic tags into Python objects
(datetimes, decimals, regexes, sets, shared references that can build cyclic structures, ...) and
accepts indefinite-length items, duplicate keys and any hashable map key. The wire protocol uses
none of that, so :func:`loads_untrusted` switches every such feature off and maps every exception
cbor2 can raise to :class:`~bridge_protocol.errors.MalformedFrame`.
"""

from __future__ import annotations

import io
from typing import Any, NoReturn

import cbor2

from bridge_protocol.errors import InvalidMessage, MalformedFrame

__all__ = ["check_item_count", "dumps", "loads_untrusted"]


class _ForbiddenTag(Exception):
    """Raised from inside cbor2's hooks; cbor2 wraps it, :func:`loads_untrusted` unwraps it."""

    def __init__(self, tag: int) -> None:
        super().__init__(tag)
        self.tag = tag


def _reject_tag_number(tag: int) -> Any:
    def reject(*_args: object) -> NoReturn:
        raise _ForbiddenTag(tag)

    return reject


class _RejectEverySemanticTag(dict[int, Any]):
    """A ``semantic_decoders`` mapping that answers "reject" for every tag number.

    cbor2 consults this mapping before its built-in decoders, by item lookup, each time it meets a
    tag (measured with cbor2 6.3): ``__missing__`` therefore covers every tag, including built-ins
    that would otherwise construct objects without ever reaching ``tag_hook`` (35 regex, 36 MIME,
    28/29 shared references, 256 string namespaces, 55799 self-describe). The explicit entries
    keep the known built-ins rejected even if a later cbor2 copies the mapping instead of
    consulting it, and ``tag_hook`` catches whatever is left. The tests sweep tag numbers to
    prove it.
    """

    def __missing__(self, tag: int) -> Any:
        return _reject_tag_number(tag)


_KNOWN_BUILTIN_TAGS = (
    *range(6),
    *range(21, 38),
    100,
    256,
    *range(258, 264),
    269,
    270,
    1004,
    1040,
    55799,
)
_SEMANTIC_DECODERS = _RejectEverySemanticTag(
    {t: _reject_tag_number(t) for t in _KNOWN_BUILTIN_TAGS}
)


def _reject_tag(tag: cbor2.CBORTag, _immutable: bool) -> NoReturn:
    raise _ForbiddenTag(tag.tag)


def _forbidden_tag_in(exc: BaseException) -> int | None:
    seen: BaseException | None = exc
    for _ in range(8):  # cbor2 wraps hook errors once or twice; bounded in case of cycles
        if seen is None:
            return None
        if isinstance(seen, _ForbiddenTag):
            return seen.tag
        seen = seen.__cause__ or seen.__context__
    return None


def check_item_count(body: bytes | bytearray | memoryview, limit: int) -> None:
    """Refuse a body holding more than ``limit`` CBOR data items (map keys included).

    Why: decoding amplifies. A 16 MiB frame of empty arrays becomes 16 million Python lists, about
    1.2 GB (measured), so a hostile sandbox could exhaust the host's memory within the frame size
    limit. Every item takes at least one byte, so bodies no longer than ``limit`` are skipped
    outright; longer ones are walked header by header (items are stored depth-first, so a linear
    walk visits every item without tracking the structure). The walk stops at anything it does not
    understand (reserved or indefinite-length headers, truncation): decoding reports those.
    """
    if len(body) <= limit:
        return
    pos, end, count = 0, len(body), 0
    from_bytes = int.from_bytes
    while pos < end:
        count += 1
        if count > limit:
            raise MalformedFrame(f"frame holds more than {limit} CBOR items")
        initial = body[pos]
        pos += 1
        info = initial & 0x1F
        if info < 24:
            argument = info
        elif info < 28:  # the argument follows in 1, 2, 4 or 8 bytes (for floats: the value)
            size = 1 << (info - 24)
            argument = from_bytes(body[pos : pos + size], "big")
            pos += size
        else:
            return
        if initial >> 5 in (2, 3):  # byte and text strings: skip their content
            pos += argument


def loads_untrusted(body: bytes | bytearray | memoryview, *, max_depth: int) -> object:
    """Decode exactly one CBOR item filling ``body``, with every optional CBOR feature refused.

    Raises :class:`MalformedFrame` for invalid CBOR, trailing bytes, nesting deeper than
    ``max_depth``, indefinite-length items, duplicate map keys, map keys that are not strings, and
    any semantic tag.
    """
    stream = io.BytesIO(body)
    decoder = cbor2.CBORDecoder(
        stream,
        tag_hook=_reject_tag,
        semantic_decoders=_SEMANTIC_DECODERS,
        max_depth=max_depth,
        allow_indefinite=False,
        allow_duplicate_keys=False,
        # Only text or byte-string keys: no attacker-chosen hash collisions through tuples or
        # floats. Byte-string keys are rejected later, by validation.
        strict_hashable_types=True,
    )
    try:
        untrusted = decoder.decode()
    # The decoder is native code fed attacker-controlled bytes: whatever it raises (CBORDecodeError,
    # ValueError, OverflowError, MemoryError for absurd declared lengths, RecursionError, ...) means
    # "this frame is invalid", and nothing but a ProtocolError may leave this package.
    except Exception as exc:
        tag = _forbidden_tag_in(exc)
        if tag is not None:
            raise MalformedFrame(f"CBOR tag {tag} is not allowed") from None
        raise MalformedFrame(f"invalid CBOR: {exc}") from None
    # The decoder rewinds the stream to the end of the item it read, so the position tells whether
    # the frame held anything after its one map.
    consumed = stream.tell()
    if consumed != len(body):
        raise MalformedFrame(f"{len(body) - consumed} trailing byte(s) after the frame's CBOR map")
    return untrusted


def dumps(wire: object) -> bytes:
    """Encode an already validated wire value (plain maps, arrays, strings, numbers, bytes).

    Raises :class:`InvalidMessage` for text that is not valid Unicode (lone surrogates, as
    produced by ``surrogateescape``): CBOR text must be UTF-8.
    """
    try:
        return cbor2.dumps(wire)
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"text is not valid Unicode: {exc.reason} at {exc.start}") from None
