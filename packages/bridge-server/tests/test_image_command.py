"""`mcp-code-execution-mode image ...`: the image builder, installed with the server."""

from __future__ import annotations

import pytest
from bridge_core.runtime import IMAGE_BUILD_COMMAND, _locality
from bridge_image import DEFAULT_IMAGE, SLIM_IMAGE
from mcp_code_execution_mode.cli import main
from mcp_code_execution_mode.settings import Settings


def test_image_tag_prints_the_image_the_bridge_uses_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["image", "tag"]) == 0
    assert capsys.readouterr().out.strip() == DEFAULT_IMAGE == Settings().image
    assert main(["image", "tag", "--slim"]) == 0
    assert capsys.readouterr().out.strip() == SLIM_IMAGE


def test_image_usage_errors_carry_the_servers_command_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["image"])
    assert exited.value.code == 2
    assert "usage: mcp-code-execution-mode image" in capsys.readouterr().err


def test_the_help_lists_the_image_command_the_error_messages_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "image" in out
    assert IMAGE_BUILD_COMMAND.split()[0] == "mcp-code-execution-mode"
    assert IMAGE_BUILD_COMMAND.split()[1:] == ["image", "build"]


@pytest.mark.parametrize("command", [[], ["doctor"], ["setup", "cursor"], ["demo"]])
def test_on_windows_the_commands_say_to_run_the_bridge_in_wsl2(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_locality, "host_system", lambda: "win32")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "WSL2" in err
    assert "process groups" in err  # what Windows lacks, not only where to go
    assert "docs/platforms.md" in err
    assert "Traceback" not in err


def test_on_windows_the_image_commands_still_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_locality, "host_system", lambda: "win32")
    assert main(["image", "tag"]) == 0
    assert capsys.readouterr().out.strip() == DEFAULT_IMAGE
