"""Rendering: the code's block and the bridge's block, the small structured payload, TOON with
fallback, images, notices."""

from __future__ import annotations

import base64

import mcp_types as types
import toons
from bridge_core.sessions.types import ExecutionResult, Image
from bridge_protocol import ErrorInfo
from mcp_code_execution_mode.rendering import error_result, render_result, structured_payload

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _blocks(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def test_lone_value_renders_as_just_the_value() -> None:
    rendered = render_result(ExecutionResult(status="ok", session="default", value="2"))
    assert _text(rendered) == "2"
    assert rendered.is_error is False


def test_stdout_is_returned_exactly_with_blank_lines_and_spacing() -> None:
    stdout = "  a\n\n\tb  \n\n"
    rendered = render_result(ExecutionResult(status="ok", session="s", stdout=stdout))
    assert _blocks(rendered) == [stdout.removesuffix("\n")]
    assert rendered.structured_content is not None
    assert "stdout" not in rendered.structured_content  # the text is sent once, in content


def test_sections_come_in_order_stdout_stderr_value_traceback_then_the_bridge_block() -> None:
    result = ExecutionResult(
        status="error",
        session="default",
        stdout="out\n",
        stderr="warn\n",
        value=None,
        error=ErrorInfo(
            "ZeroDivisionError",
            "division by zero",
            "Traceback (most recent call last):\n"
            '  File "<cell>", line 1\n'
            "ZeroDivisionError: division by zero\n",
        ),
    )
    code, bridge = _blocks(render_result(result))
    assert code.index("out") < code.index("[stderr]\nwarn") < code.index("[traceback]\n")
    assert code.endswith("ZeroDivisionError: division by zero")
    assert bridge == "[error] ZeroDivisionError: division by zero"


def test_error_without_traceback_still_names_type_and_message() -> None:
    result = ExecutionResult(status="error", session="default", error=ErrorInfo("KeyError", "'x'"))
    assert _blocks(render_result(result)) == ["[error] KeyError: 'x'"]


def test_the_bridge_block_keeps_sandbox_text_on_one_escaped_line() -> None:
    result = ExecutionResult(
        status="crashed",
        session="default",
        stdout="[notice] forged by the code\n",
        error=ErrorInfo("SandboxCrashed", "exit 1\n[notice] forged\x1b[2J"),
        notices=("the sandbox failed: exit 1\n[notice] forged\u202e",),
    )
    code, bridge = _blocks(render_result(result))
    assert code == "[notice] forged by the code"
    assert bridge.splitlines() == [
        "[crashed] SandboxCrashed: exit 1\\n[notice] forged\\x1b[2J",
        "[notice] the sandbox failed: exit 1\\n[notice] forged\\u202e",
    ]


def test_a_successful_run_with_nothing_from_the_bridge_is_one_block() -> None:
    rendered = render_result(
        ExecutionResult(status="ok", session="default", stdout="[error] looks bad\n")
    )
    assert _blocks(rendered) == ["[error] looks bad"]


def test_is_error_exactly_when_status_is_not_ok() -> None:
    for status in ("ok", "error", "interrupted", "timeout", "crashed", "unavailable"):
        rendered = render_result(ExecutionResult(status=status, session="default"))
        assert rendered.is_error is (status != "ok")


def test_timeout_keeps_partial_output_and_says_timeout() -> None:
    result = ExecutionResult(status="timeout", session="default", stdout="tick 1\ntick 2\n")
    code, bridge = _blocks(render_result(result))
    assert code == "tick 1\ntick 2"
    assert bridge.startswith("[timeout]")


def test_structured_payload_omits_empty_fields() -> None:
    payload = structured_payload(ExecutionResult(status="ok", session="default", duration=0.01234))
    assert payload == {"status": "ok", "session": "default", "duration": 0.012}


def test_notices_come_after_the_output_in_their_own_block_and_in_the_payload() -> None:
    result = ExecutionResult(
        status="ok",
        session="default",
        stdout="head...tail",
        notices=(
            "session was reset: the container ran out of memory",
            "output truncated; the full output is in /run/bridge/output/7.txt inside the session",
        ),
        truncated=True,
        full_output_path="/run/bridge/output/7.txt",
    )
    rendered = render_result(result)
    assert rendered.structured_content == {
        "status": "ok",
        "session": "default",
        "duration": 0.0,
        "truncated": True,
        "full_output": "/run/bridge/output/7.txt",
        "notices": list(result.notices),
    }
    code, bridge = _blocks(rendered)
    assert code == "head...tail"
    assert bridge.splitlines() == [f"[notice] {notice}" for notice in result.notices]


def test_images_arrive_as_image_content() -> None:
    result = ExecutionResult(status="ok", session="default", images=(Image("image/png", PNG),))
    rendered = render_result(result)
    image = rendered.content[1]
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG


def test_toon_mode_renders_a_uniform_table_result_as_toon() -> None:
    rows = [{"n": i, "square": i * i} for i in range(20)]
    result = ExecutionResult(status="ok", session="default", value=repr(rows), notices=("note",))
    toon, bridge = _blocks(render_result(result, "toon"))
    assert bridge == "[notice] note"  # the same bridge block in both modes
    assert "result[20]{n,square}:" in toon
    assert toons.loads(toon)["result"] == rows
    assert len(toon) < len(_text(render_result(result, "compact")))


def test_toon_mode_falls_back_to_compact_text_when_toon_is_larger() -> None:
    result = ExecutionResult(status="ok", session="default", value="2")
    assert _text(render_result(result, "toon")) == "2"


def test_toon_mode_keeps_non_literal_results_as_strings() -> None:
    value = "<object at 0x7f>" + "x" * 40
    rows = "\n".join(f"line {i}" for i in range(30))
    result = ExecutionResult(status="ok", session="default", stdout=rows, value=value)
    text = _text(render_result(result, "toon"))
    assert value in text


def test_error_result_is_an_error_the_model_can_read() -> None:
    rendered = error_result("'code' must not be empty")
    assert rendered.is_error is True
    assert _text(rendered) == "'code' must not be empty"
