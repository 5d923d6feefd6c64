"""The versioned CBOR wire protocol between the MCP code-execution bridge and its sandboxes.

Sans-IO: :func:`encode` turns a message into a frame, :class:`FrameDecoder` turns bytes (in any
chunking) into messages. See ``docs/protocol.md`` for the full specification.
"""

from bridge_protocol.codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode
from bridge_protocol.errors import (
    ErrorCode,
    FrameTooLarge,
    MalformedFrame,
    ProtocolError,
    UnknownMessageKind,
    UnsupportedVersion,
)
from bridge_protocol.messages import (
    HOST_TO_SANDBOX,
    MESSAGE_TYPES,
    SANDBOX_TO_HOST,
    Call,
    CancelCall,
    Display,
    ErrorInfo,
    Execute,
    ExecutionStatus,
    Fault,
    Hello,
    Interrupt,
    JSONValue,
    Message,
    Output,
    Ping,
    Pong,
    Progress,
    Refusal,
    Reply,
    Request,
    Result,
    Shutdown,
    Stream,
    Welcome,
)
from bridge_protocol.versions import CURRENT_VERSION, SUPPORTED_VERSIONS, negotiate

__version__ = "0.1.0"

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FRAME_SIZE",
    "HOST_TO_SANDBOX",
    "MESSAGE_TYPES",
    "SANDBOX_TO_HOST",
    "SUPPORTED_VERSIONS",
    "Call",
    "CancelCall",
    "Display",
    "ErrorCode",
    "ErrorInfo",
    "Execute",
    "ExecutionStatus",
    "Fault",
    "FrameDecoder",
    "FrameTooLarge",
    "Hello",
    "Interrupt",
    "JSONValue",
    "MalformedFrame",
    "Message",
    "Output",
    "Ping",
    "Pong",
    "Progress",
    "ProtocolError",
    "Refusal",
    "Reply",
    "Request",
    "Result",
    "Shutdown",
    "Stream",
    "UnknownMessageKind",
    "UnsupportedVersion",
    "Welcome",
    "__version__",
    "encode",
    "negotiate",
]
