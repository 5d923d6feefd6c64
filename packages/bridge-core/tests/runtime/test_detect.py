from pathlib import Path

import pytest
from bridge_core.errors import ConfigError, RuntimeUnavailable
from bridge_core.runtime import detect_runtime
from bridge_core.runtime.local import LocalBackend
from bridge_core.runtime.podman import PodmanBackend


async def test_an_unknown_runtime_name_is_a_config_error_naming_the_setting(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="MCP_BRIDGE_RUNTIME"):
        await detect_runtime("kubernetes", state_dir=tmp_path)


async def test_local_is_not_a_runtime_any_setting_can_choose(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MCP_BRIDGE_RUNTIME"):
        await detect_runtime("local", state_dir=tmp_path)


async def test_the_local_test_backend_says_it_isolates_nothing(tmp_path: Path) -> None:
    backend = LocalBackend(state_dir=tmp_path)
    info = await backend.info()
    assert not info.limits_enforced
    assert "NO ISOLATION" in info.detail
    await backend.aclose()


async def test_missing_docker_is_reported_with_what_was_tried_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeUnavailable) as caught:
        await detect_runtime("docker", state_dir=tmp_path)
    message = str(caught.value)
    assert "docker" in message
    assert "MCP_BRIDGE_RUNTIME" in message


async def test_a_podman_url_that_does_not_answer_is_unavailable(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/nothing.sock"
    with pytest.raises(RuntimeUnavailable, match=r"nothing\.sock"):
        await PodmanBackend.connect(state_dir=tmp_path, url=url)


async def test_auto_detection_names_every_runtime_tried_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge_core.runtime import _podman_api

    monkeypatch.setenv("PATH", str(tmp_path))  # neither podman nor docker binaries
    monkeypatch.setattr(
        _podman_api, "socket_candidates", lambda env, euid: [f"unix://{tmp_path}/no.sock"]
    )
    with pytest.raises(RuntimeUnavailable) as caught:
        await detect_runtime(None, state_dir=tmp_path)
    message = str(caught.value)
    assert "tried podman, docker" in message
    assert "no.sock" in message
    assert "no `docker` binary" in message
    assert "scripts/prepare-host" in message
