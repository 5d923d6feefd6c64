"""Sandboxes are created from the image ID that was checked, not by the image's name (issue 34):
a name re-tagged between the check and a start must not swap the image that runs. The name
stays what messages show."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from bridge_core._ownership import current_owner
from bridge_core.errors import SandboxStartError
from bridge_core.runtime._docker_cli import CommandRefused
from bridge_core.runtime._podman_create import ImageEnvs, create_verified
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.docker import DockerBackend, create_args
from podman.errors import APIError

NAME = "localhost/mcp-bridge-sandbox:1"
CHECKED = "sha256:" + "5e" * 32
MOVED = "sha256:" + "a7" * 32
"""What the name points at by the time a sandbox starts: another image."""
OWN_FILTER = ("seccomp=/p.json",)
"""A filter of the user's own: these tests need no profile of the bridge's."""


class _PodmanImages:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def exists(self, image: str) -> bool:
        self.asked.append(image)
        return False


class _PodmanContainers:
    def __init__(self) -> None:
        self.created: list[str] = []

    def create(self, image: str, **kwargs: Any) -> None:
        self.created.append(image)
        raise APIError("image not known")


class _Podman:
    """A podman client whose create fails as podman 4.3's does for a missing image."""

    def __init__(self) -> None:
        self.images = _PodmanImages()
        self.containers = _PodmanContainers()


def _create_on_podman(spec: SandboxSpec, client: _Podman) -> None:
    create_verified(
        client,  # type: ignore[arg-type]
        spec,
        "mcp-sandbox-1",
        owner=current_owner(),
        seccomp=None,
        seccomp_problem="",
        link=None,
        url="unix:///test.sock",
        cgroup_parent=None,
        channel_dir=Path("/d"),
        log_path=None,
        image_envs=ImageEnvs(),
    )


def test_podman_creates_the_sandbox_from_the_checked_image_id_and_names_the_image() -> None:
    client = _Podman()
    spec = SandboxSpec(name="s", image=NAME, image_id=CHECKED, security_opt=OWN_FILTER)
    with pytest.raises(SandboxStartError) as raised:
        _create_on_podman(spec, client)
    assert client.containers.created == [CHECKED]
    assert client.images.asked == [CHECKED]
    assert NAME in str(raised.value)
    assert CHECKED in str(raised.value)


def test_podman_creates_by_name_when_nothing_was_checked() -> None:
    client = _Podman()
    with pytest.raises(SandboxStartError):
        _create_on_podman(SandboxSpec(name="s", image=NAME, security_opt=OWN_FILTER), client)
    assert client.containers.created == [NAME]


def test_docker_create_ends_with_the_checked_image_id() -> None:
    spec = SandboxSpec(name="s", image=NAME, image_id=CHECKED)
    args = create_args(spec, name="n", labels={}, channel_dir=Path("/d"))
    assert args[-1] == CHECKED
    assert NAME not in args


class _Docker:
    """A docker CLI whose store answers every image lookup with ``answer`` and whose create
    is refused once recorded."""

    prefix: ClassVar[list[str]] = ["docker"]

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.looked_up: list[str] = []
        self.runs: list[tuple[str, ...]] = []

    async def inspect(self, kind: str, name: str) -> dict[str, Any]:
        self.looked_up.append(name)
        return {"Id": self.answer, "Config": {"Env": ["PATH=/usr/bin"]}}

    async def run(self, *args: str, finish: bool = False) -> str:
        self.runs.append(args)
        raise CommandRefused("Error response from daemon: refused by the test")


@pytest.mark.parametrize(
    ("checked", "looked_up", "answer"),
    [(CHECKED, CHECKED, CHECKED), (None, NAME, MOVED)],
    ids=["checked", "by-name"],
)
async def test_docker_creates_from_the_id_of_the_image_it_looked_up(
    tmp_path: Path, checked: str | None, looked_up: str, answer: str
) -> None:
    # Unchecked (a remote engine), the image is still created from the ID whose environment
    # the verification allows, not from a name that may have moved since the lookup.
    cli = _Docker(answer)
    backend = DockerBackend(cli, state_dir=tmp_path)  # type: ignore[arg-type]
    spec = SandboxSpec(name="s", image=NAME, image_id=checked, security_opt=OWN_FILTER)
    with pytest.raises(SandboxStartError):
        await backend._launch(spec, "mcp-sandbox-1", tmp_path / "channel")
    assert cli.looked_up == [looked_up]
    ((*_, image),) = cli.runs
    assert image == answer
