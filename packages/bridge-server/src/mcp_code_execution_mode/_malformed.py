"""JSON-RPC error answers for lines the SDK cannot decode.

The SDK's stdio transport hands a line that is not a JSON-RPC message to the server as an
exception, and the server only logs it: the client never learns why its request went
unanswered. JSON-RPC 2.0 asks for an error response: ``-32700`` (parse error) for text that is
not JSON, ``-32600`` (invalid request) for JSON that is no valid message, with the request's id
when one can be read and ``null`` otherwise.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["AnswerMalformed", "error_for"]

logger = logging.getLogger(__name__)

Incoming = SessionMessage | Exception


def error_for(exc: Exception) -> types.JSONRPCError:
    """The error response for an undecodable incoming line."""
    code = types.PARSE_ERROR
    request_id: str | int | None = None
    if isinstance(exc, ValidationError):
        for error in exc.errors():
            if error["type"] != "json_invalid":
                code = types.INVALID_REQUEST
            value = error.get("input")
            if isinstance(value, dict):
                candidate = value.get("id")
                if isinstance(candidate, (str, int)) and not isinstance(candidate, bool):
                    request_id = candidate
    message = "Parse error" if code == types.PARSE_ERROR else "Invalid request"
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


class AnswerMalformed:
    """A read stream (the SDK's ``ReadStream`` shape) over another that answers undecodable
    lines on ``write`` itself and passes only decoded messages on."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    @property
    def last_context(self) -> Any:
        # The SDK reads the sender's context from its own streams this way.
        return getattr(self._read, "last_context", None)

    async def receive(self) -> Incoming:
        while True:
            item: Incoming = await self._read.receive()
            if not isinstance(item, Exception):
                return item
            logger.warning("answering an undecodable client message with an error: %s", item)
            await self._write.send(SessionMessage(error_for(item)))

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Incoming:
        try:
            return await self.receive()
        except anyio.EndOfStream:  # as the wrapped memory stream's own iteration does
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
