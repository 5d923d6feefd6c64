"""The server's check of its image before the first sandbox: which runtimes are checked, and a
release record that cannot be read refuses the image instead of leaving it unchecked."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.errors import SandboxStartError
from mcp_code_execution_mode._image_supply import check_image, require_image
from mcp_code_execution_mode.settings import Settings


def test_a_runtime_without_images_is_not_checked() -> None:
    assert check_image(Settings(), "local") is None
    assert require_image(Settings(), "local") is None


def test_an_unreadable_release_record_refuses_the_image_before_any_engine_call(
    tmp_path: Path,
) -> None:
    record = tmp_path / "release.json"
    record.write_text("{not json")
    settings = Settings(image_release=record)
    for engine in ("podman", "docker"):
        supplied = check_image(settings, engine)
        assert supplied is not None
        assert (supplied.case, supplied.usable) == ("refused", False)
        assert "[image] release" in supplied.fix
        with pytest.raises(SandboxStartError, match="release record cannot be read"):
            require_image(settings, engine)
