"""Protocol errors and the wire error codes.

Only integer codes cross the wire (in :class:`~bridge_protocol.messages.Fault` and
:class:`~bridge_protocol.messages.Refusal`); each side rebuilds its own exceptions from them.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ErrorCode",
    "FrameTooLarge",
    "InvalidMessage",
    "MalformedFrame",
    "ProtocolError",
    "UnexpectedMessage",
    "UnknownMessageKind",
    "UnsupportedVersion",
]


class ErrorCode(IntEnum):
    """Wire error codes. Values are part of the protocol: never renumber, only add."""

    # Protocol level (1xx)
    MALFORMED_FRAME = 100
    FRAME_TOO_LARGE = 101
    UNKNOWN_MESSAGE_KIND = 102
    UNSUPPORTED_VERSION = 103
    UNEXPECTED_MESSAGE = 104

    # Call/request level (2xx)
    UNKNOWN_SERVER = 200
    UNKNOWN_TOOL = 201
    TOOL_ERROR = 202
    """The upstream tool reported an error (``isError`` result or JSON-RPC error)."""
    UPSTREAM_UNAVAILABLE = 203
    """The upstream server could not be started, crashed, or is cooling down after failures."""
    CALL_TIMEOUT = 204
    POLICY_DENIED = 205
    INVALID_ARGUMENTS = 206
    UNKNOWN_METHOD = 207
    CANCELLED = 208
    TOO_MANY_CALLS = 209
    """The sandbox already has as many calls (or bytes of them) in flight as the host allows:
    this call was refused before anything was forwarded, and may be made again later."""
    APPROVAL_DECLINED = 210
    """The call needed the user's approval and did not get it (declined, unanswered in time, or
    no way to ask): it never reached the server."""
    INTERNAL = 299


class ProtocolError(Exception):
    """Root of every error raised by this package."""

    code: ErrorCode = ErrorCode.MALFORMED_FRAME


class MalformedFrame(ProtocolError):
    """The bytes are not a valid frame: bad CBOR, forbidden CBOR feature, or wrong field types."""

    code = ErrorCode.MALFORMED_FRAME


class FrameTooLarge(ProtocolError):
    """A frame exceeds the maximum size.

    Raised by the decoder on the 4-byte length prefix alone (before any body byte is buffered),
    and by the encoder for a message whose encoding would exceed the peer's maximum.
    """

    code = ErrorCode.FRAME_TOO_LARGE


class InvalidMessage(ProtocolError, ValueError):
    """A message handed to the encoder holds something the wire cannot carry.

    For example a tool argument that is a ``set`` or a ``datetime``, a map with non-text keys, an
    integer outside 64 bits, or nesting deeper than the peer accepts. Raised before any byte is
    produced, so the sender can report it instead of having the peer drop the connection.
    """

    code = ErrorCode.MALFORMED_FRAME


class UnknownMessageKind(ProtocolError):
    """The frame's ``kind`` is not a message this side accepts."""

    code = ErrorCode.UNKNOWN_MESSAGE_KIND


class UnsupportedVersion(ProtocolError):
    """The peers share no protocol version."""

    code = ErrorCode.UNSUPPORTED_VERSION


class UnexpectedMessage(ProtocolError):
    """A valid message arrived where the protocol does not allow it (e.g. no ``hello`` first)."""

    code = ErrorCode.UNEXPECTED_MESSAGE
