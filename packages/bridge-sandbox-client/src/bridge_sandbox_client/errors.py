"""Exceptions user code sees when a tool call or a bridge request fails.

Only integer codes cross the wire (:class:`bridge_protocol.Fault`); this module rebuilds the
sandbox-side exceptions from them. Every class is importable ``from mcp import ...``.
"""

from __future__ import annotations

from typing import Any

from bridge_protocol import ErrorCode, Fault

__all__ = [
    "ToolError",
    "ToolTimeout",
    "PolicyDenied",
    "ApprovalDeclined",
    "UpstreamUnavailable",
    "UnknownServer",
    "UnknownTool",
    "InvalidArguments",
    "ToolCancelled",
    "TooManyCalls",
    "BridgeDisconnected",
    "error_from_fault",
]


class ToolError(Exception):
    """A tool call (or a discovery request) failed.

    ``code`` is the wire error code (:class:`bridge_protocol.ErrorCode`), ``server`` and ``tool``
    say what was called, ``result`` holds the full ``CallToolResult`` dict when the tool itself
    answered with ``isError``.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = ErrorCode.TOOL_ERROR,
        server: str | None = None,
        tool: str | None = None,
        result: dict[str, Any] | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.server = server
        self.tool = tool
        self.result = result
        self.data = data

    def __str__(self) -> str:
        # The message as the host wrote it (KeyError, a base of some subclasses, would quote it).
        return self.message


class ToolTimeout(ToolError):
    """The host gave up waiting for the upstream server."""


class PolicyDenied(ToolError):
    """The bridge's policy does not allow this server or tool.

    Raised wherever the name is used (attribute, item, import, call): a denied tool exists, so
    this is not an ``AttributeError`` and ``hasattr`` does not hide it. The message and
    :attr:`rule` name the setting and pattern that refused it
    (``[policy] deny_tools=github.delete_*``).
    """

    @property
    def rule(self) -> str | None:
        """The rule that refused: ``SETTING=pattern``, or the allow-list setting's name."""
        rule = self.data.get("rule") if isinstance(self.data, dict) else None
        return rule if isinstance(rule, str) else None


class ApprovalDeclined(PolicyDenied):
    """The call needed the user's approval and did not get it; it never reached the server.

    The user declined (or dismissed) the question, did not answer in time, or the MCP client
    cannot ask (then the message names the setting that decides), or the call was not asked
    about because its arguments could not be shown honestly. :attr:`reason` says which:
    ``declined``, ``cancelled``, ``timeout``, ``unsupported``, ``declined_earlier`` (the user
    already declined this tool during this run) or ``unshowable`` (too many undeclared
    arguments, or too long a question: the message says which). Catch it to adapt: skip the
    step, or tell the user what was not done.
    """

    @property
    def reason(self) -> str | None:
        """Why the approval is missing (see the class docstring)."""
        reason = self.data.get("reason") if isinstance(self.data, dict) else None
        return reason if isinstance(reason, str) else None


class UpstreamUnavailable(ToolError):
    """The upstream MCP server could not be started, crashed, or is cooling down."""


class _UnknownName(ToolError, AttributeError, KeyError):
    """A name that means nothing: also an ``AttributeError`` and a ``KeyError``, so ``hasattr``,
    ``getattr(x, name, default)`` and ``except KeyError`` work on servers and tools as on any
    Python object. Import statements raise ``ImportError`` with the same message instead."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        # Set, so Python does not fill in ``name``/``obj`` on attribute access and its traceback
        # adds no "Did you mean" of its own: the host's suggestion is the only one.
        self.obj = None

    @property
    def suggestions(self) -> list[str]:
        """The host's closest names, best first (empty when none is close)."""
        found = self.data.get("suggestions") if isinstance(self.data, dict) else None
        return [s for s in found if isinstance(s, str)] if isinstance(found, list) else []


class UnknownServer(_UnknownName):
    """No configured MCP server has this name (the message suggests close ones)."""


class UnknownTool(_UnknownName):
    """The server has no tool of this name (the message suggests close ones)."""


class InvalidArguments(ToolError):
    """The host or the upstream server rejected the arguments."""


class ToolCancelled(ToolError):
    """The call was abandoned (interrupt, or the host cancelled it)."""


class TooManyCalls(ToolError):
    """The sandbox already had as many calls (or bytes of them) in flight as the bridge allows;
    the call was not made, so it is safe to make again once some of the others are done."""


class BridgeDisconnected(ToolError):
    """The channel to the host closed while the call was in flight."""


_BY_CODE: dict[int, type[ToolError]] = {
    ErrorCode.TOOL_ERROR: ToolError,
    ErrorCode.CALL_TIMEOUT: ToolTimeout,
    ErrorCode.POLICY_DENIED: PolicyDenied,
    ErrorCode.APPROVAL_DECLINED: ApprovalDeclined,
    ErrorCode.UPSTREAM_UNAVAILABLE: UpstreamUnavailable,
    ErrorCode.UNKNOWN_SERVER: UnknownServer,
    ErrorCode.UNKNOWN_TOOL: UnknownTool,
    ErrorCode.INVALID_ARGUMENTS: InvalidArguments,
    ErrorCode.CANCELLED: ToolCancelled,
    ErrorCode.TOO_MANY_CALLS: TooManyCalls,
}


def error_from_fault(
    fault: Fault, *, server: str | None = None, tool: str | None = None
) -> ToolError:
    """The exception for a host ``Fault``: a :class:`ToolError` subclass chosen by its code."""
    cls = _BY_CODE.get(fault.code, ToolError)
    return cls(fault.message, code=fault.code, server=server, tool=tool, data=fault.data)


# User code imports these from ``mcp`` (``from mcp import ToolError``): name them so in
# tracebacks and reprs, instead of this package's private path.
for _cls in (ToolError, *_BY_CODE.values(), BridgeDisconnected):
    _cls.__module__ = "mcp"
del _cls
