"""Error answers for client lines the SDK cannot decode (JSON-RPC 2.0 section 5.1)."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_code_execution_mode._malformed import AnswerMalformed, error_for
from pydantic import ValidationError


def _decode_error(line: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    return caught.value


def test_text_that_is_not_json_is_a_parse_error_without_id() -> None:
    error = error_for(_decode_error("{not json"))
    assert error.id is None
    assert error.error.code == types.PARSE_ERROR


def test_json_that_is_not_a_request_is_invalid_request_with_its_id() -> None:
    error = error_for(_decode_error('{"jsonrpc": "2.0", "id": 7, "method": "x", "params": 5}'))
    assert error.id == 7
    assert error.error.code == types.INVALID_REQUEST


def test_a_boolean_id_is_not_taken_for_a_request_id() -> None:
    error = error_for(_decode_error('{"jsonrpc": "2.0", "id": true, "method": 1}'))
    assert error.id is None


async def test_undecodable_items_are_answered_and_messages_passed_on() -> None:
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](4)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](4)
    ping = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))
    await incoming_send.send(_decode_error("garbage"))
    await incoming_send.send(ping)
    await incoming_send.aclose()
    stream = AnswerMalformed(incoming, outgoing)
    with anyio.fail_after(5):
        passed = [item async for item in stream]
    answered = outgoing_receive.receive_nowait()
    assert passed == [ping]
    assert isinstance(answered.message, types.JSONRPCError)
    assert answered.message.error.code == types.PARSE_ERROR
    outgoing.close()
    outgoing_receive.close()
