"""A runtime that cannot reach the sandbox channel is refused up front, with the reason.

The channel is a unix socket in a bind-mounted host directory: it needs the bridge and the
containers on one Linux kernel. Off Linux (macOS, Windows) and against a runtime in a VM or on
another machine, the bridge says so before starting a container that could never connect.
"""

import sys
from pathlib import Path

import pytest
from bridge_core.errors import RuntimeUnavailable
from bridge_core.runtime import PLATFORMS_GUIDE, detect_runtime, kernel_problem, platform_problem


def test_linux_is_the_platform_sandboxes_run_on() -> None:
    assert platform_problem("linux") is None


@pytest.mark.parametrize(
    ("system", "named"), [("darwin", "macOS"), ("win32", "WSL2"), ("freebsd14", "freebsd14")]
)
def test_off_linux_the_problem_names_the_platform_the_reason_and_the_guide(
    system: str, named: str
) -> None:
    problem = platform_problem(system)
    assert problem is not None
    assert named in problem
    assert "unix socket" in problem
    assert PLATFORMS_GUIDE in problem


def test_a_runtime_on_another_kernel_is_a_vm_or_another_machine() -> None:
    assert kernel_problem("podman", "unix:///run/podman/podman.sock", "6.1.0-18", "6.1.0-18") == ""
    assert kernel_problem("docker", "ssh://box", "", "6.1.0-18") == ""  # the runtime did not say
    problem = kernel_problem("podman", "ssh://core@127.0.0.1:5555", "6.8.9-300.fc40", "23.4.0")
    assert "ssh://core@127.0.0.1:5555" in problem
    assert "6.8.9-300.fc40" in problem
    assert "23.4.0" in problem
    assert "CONTAINER_HOST" in problem
    assert PLATFORMS_GUIDE in problem


async def test_off_linux_detection_refuses_before_probing_any_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    for preference in (None, "podman", "docker"):
        with pytest.raises(RuntimeUnavailable) as caught:
            await detect_runtime(preference, state_dir=tmp_path)
        assert "macOS" in str(caught.value)
        assert "tried" not in str(caught.value)  # no runtime was probed
    assert not (tmp_path / "sandboxes").exists()
