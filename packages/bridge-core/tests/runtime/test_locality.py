"""Which engines the bridge may use from the operating system it runs on, decided up front.

The socket channel needs the bridge and the containers on one Linux kernel; the stdio channel,
which an engine reached over ssh always gets, needs neither a shared kernel nor a shared file
system. So on Linux every engine is tried; on macOS only podman over ssh (podman machine's VM),
and a local engine is refused with the settings that reach podman machine instead; on Windows
nothing, because the bridge process itself needs POSIX. The platform is read by one function,
``host_system``, which these tests replace.
"""

from pathlib import Path

import pytest
from bridge_core.errors import RuntimeUnavailable
from bridge_core.runtime import (
    PLATFORMS_GUIDE,
    _locality,
    detect,
    detect_runtime,
    kernel_problem,
    platform_problem,
    process_problem,
)
from bridge_core.runtime.detect import RuntimeTarget

MACHINE_URL = "ssh://core@127.0.0.1:53671/run/user/501/podman/podman.sock"


@pytest.fixture
def system(monkeypatch: pytest.MonkeyPatch) -> "FakeSystem":
    return FakeSystem(monkeypatch)


class FakeSystem:
    """Sets what ``host_system`` answers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        monkeypatch.delenv("CONTAINER_HOST", raising=False)

    def __call__(self, name: str) -> None:
        self._monkeypatch.setattr(_locality, "host_system", lambda: name)


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, RuntimeTarget]]:
    """Backends detection asked for, in order; each 'connects' without touching an engine."""
    calls: list[tuple[str, RuntimeTarget]] = []

    async def fake_connect(name: str, state_dir: Path, target: RuntimeTarget) -> object:
        calls.append((name, target))
        return name

    monkeypatch.setattr(detect, "_connect", fake_connect)
    return calls


def test_the_platform_is_the_one_python_reports() -> None:
    import sys

    assert _locality.host_system() == sys.platform


def test_on_linux_every_engine_may_be_used(system: FakeSystem) -> None:
    system("linux")
    assert platform_problem() is None
    assert platform_problem("unix:///run/podman/podman.sock", runtime="docker") is None
    assert process_problem() is None


def test_on_macos_an_engine_over_ssh_may_be_used(system: FakeSystem) -> None:
    system("darwin")
    assert platform_problem(MACHINE_URL) is None
    assert platform_problem(None, {"CONTAINER_HOST": MACHINE_URL}) is None
    assert process_problem() is None  # macOS is POSIX: every command runs


@pytest.mark.parametrize("url", [None, "unix:///var/folders/x/podman-machine-api.sock"])
def test_on_macos_a_local_engine_is_refused_with_the_settings_that_reach_podman_machine(
    system: FakeSystem, url: str | None
) -> None:
    system("darwin")
    problem = platform_problem(url, {})
    assert problem is not None
    assert "macOS" in problem
    for what in (
        "MCP_BRIDGE_RUNTIME_URL",
        "[engine] identity",
        "[engine] known_hosts",
        "podman system connection list --format json",
        "ssh-keyscan",
        PLATFORMS_GUIDE,
    ):
        assert what in problem
    if url:
        assert url in problem


def test_on_macos_docker_is_refused_even_with_an_ssh_engine(system: FakeSystem) -> None:
    system("darwin")
    problem = platform_problem(None, {"CONTAINER_HOST": MACHINE_URL}, runtime="docker")
    assert problem is not None
    assert "MCP_BRIDGE_RUNTIME=podman" in problem


@pytest.mark.parametrize("name", ["win32", "cygwin", "msys"])
def test_on_windows_nothing_runs_and_the_reason_is_what_windows_lacks(
    system: FakeSystem, name: str
) -> None:
    system(name)
    assert platform_problem(MACHINE_URL) == process_problem()
    problem = process_problem()
    assert problem is not None
    for what in ("process groups", "signals", "control master", "WSL2", PLATFORMS_GUIDE):
        assert what in problem


def test_another_posix_system_may_use_an_engine_over_ssh_only(system: FakeSystem) -> None:
    system("freebsd14")
    assert platform_problem(MACHINE_URL) is None
    problem = platform_problem(None, {})
    assert problem is not None
    assert "freebsd14" in problem
    assert "ssh://" in problem


def test_a_runtime_on_another_kernel_is_a_vm_or_another_machine() -> None:
    assert kernel_problem("podman", "unix:///run/podman/podman.sock", "6.1.0-18", "6.1.0-18") == ""
    assert kernel_problem("docker", "ssh://box", "", "6.1.0-18") == ""  # the runtime did not say
    problem = kernel_problem("podman", "ssh://core@127.0.0.1:5555", "6.8.9-300.fc40", "23.4.0")
    assert "ssh://core@127.0.0.1:5555" in problem
    assert "6.8.9-300.fc40" in problem
    assert "23.4.0" in problem
    assert "CONTAINER_HOST" in problem
    assert "MCP_BRIDGE_RUNTIME_URL=ssh://" in problem
    assert PLATFORMS_GUIDE in problem


@pytest.mark.parametrize("preference", [None, "podman", "docker"])
async def test_on_macos_detection_refuses_a_local_engine_before_probing_any(
    tmp_path: Path,
    system: FakeSystem,
    connected: list[tuple[str, RuntimeTarget]],
    preference: str | None,
) -> None:
    system("darwin")
    with pytest.raises(RuntimeUnavailable) as caught:
        await detect_runtime(preference, state_dir=tmp_path)
    assert "tried" not in str(caught.value)  # no runtime was probed
    assert connected == []
    assert not (tmp_path / "sandboxes").exists()


async def test_on_macos_detection_connects_podman_over_ssh_and_nothing_else(
    tmp_path: Path, system: FakeSystem, connected: list[tuple[str, RuntimeTarget]]
) -> None:
    system("darwin")
    target = RuntimeTarget(url=MACHINE_URL)
    backend: object = await detect_runtime(None, state_dir=tmp_path, target=target)
    assert backend == "podman"
    assert connected == [("podman", target)]


async def test_on_macos_auto_detection_with_an_ssh_container_host_tries_podman_only(
    tmp_path: Path,
    system: FakeSystem,
    connected: list[tuple[str, RuntimeTarget]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system("darwin")
    monkeypatch.setenv("CONTAINER_HOST", MACHINE_URL)

    async def unavailable(name: str, state_dir: Path, target: RuntimeTarget) -> object:
        connected.append((name, target))
        raise RuntimeUnavailable("ssh failed")

    monkeypatch.setattr(detect, "_connect", unavailable)
    with pytest.raises(RuntimeUnavailable, match=r"tried podman\)"):
        await detect_runtime(None, state_dir=tmp_path)
    assert [name for name, _ in connected] == ["podman"]


async def test_on_windows_detection_refuses_even_an_engine_over_ssh(
    tmp_path: Path, system: FakeSystem, connected: list[tuple[str, RuntimeTarget]]
) -> None:
    system("win32")
    with pytest.raises(RuntimeUnavailable, match="WSL2"):
        await detect_runtime(None, state_dir=tmp_path, target=RuntimeTarget(url=MACHINE_URL))
    assert connected == []


async def test_on_linux_auto_detection_tries_podman_then_docker(
    tmp_path: Path,
    system: FakeSystem,
    connected: list[tuple[str, RuntimeTarget]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system("linux")

    async def unavailable(name: str, state_dir: Path, target: RuntimeTarget) -> object:
        connected.append((name, target))
        raise RuntimeUnavailable("not here")

    monkeypatch.setattr(detect, "_connect", unavailable)
    with pytest.raises(RuntimeUnavailable, match=r"tried podman, docker"):
        await detect_runtime(None, state_dir=tmp_path)
    assert [name for name, _ in connected] == ["podman", "docker"]
