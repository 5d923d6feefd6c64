"""The podman backend trusts a container only after inspecting it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.channel import Channel
from bridge_core.errors import SandboxStartError
from bridge_core.runtime import _podman_api
from bridge_core.runtime.base import OWNER_LABEL, SandboxSpec
from bridge_core.runtime.podman import PodmanBackend

from .conftest import START_TIMEOUT, Shell

pytestmark = pytest.mark.container


async def _ours(backend: PodmanBackend) -> str:
    listed = await anyio.run_process(
        [
            "podman",
            "ps",
            "--all",
            "--format={{.Names}}",
            f"--filter=label={OWNER_LABEL}={backend.owner.label}",
        ]
    )
    return listed.stdout.decode()


@pytest.mark.parametrize(
    ("dropped", "named"),
    [
        ("no_new_privileges", "no-new-privileges"),
        ("pids_limit", "pids-limit"),
        ("mounts", "read-only-tmpfs=false"),
        ("auto_remove", "auto-remove"),
        ("log_config", "log path"),
        # Without it podman applies its own default profile, which lets sandbox code create
        # namespaces and open any socket family.
        ("seccomp_profile_path", "seccomp profile"),
    ],
)
async def test_a_container_missing_a_hardening_option_is_removed_and_never_run(
    podman_backend: PodmanBackend,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dropped: str,
    named: str,
) -> None:
    real = _podman_api.create_kwargs

    def weakened(*args: Any, **kwargs: Any) -> dict[str, Any]:
        # What a client library silently dropping an option looks like to the backend.
        created = real(*args, **kwargs)
        if dropped == "mounts":  # what the CLI's default --read-only-tmpfs=true would add
            created["mounts"].append({"type": "tmpfs", "source": "tmpfs", "target": "/run"})
        else:
            del created[dropped]
        return created

    monkeypatch.setattr(_podman_api, "create_kwargs", weakened)
    if dropped == "log_config" and podman_backend.channel == "stdio":
        named = "no container log"  # the stdio channel's containers must have none
    spec = SandboxSpec(name="weakened", image=sandbox_image)
    with pytest.raises(SandboxStartError, match=named):
        await podman_backend.start(spec)
    assert "weakened" not in await _ours(podman_backend)
    assert list((tmp_path / "state" / "sandboxes").glob("*/*")) == []  # per owner


async def test_a_host_variable_in_the_environment_is_caught_with_the_images_env_known(
    podman_backend: PodmanBackend,
    sandbox_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The image's own variables are read once per image ID and kept: a later start must still
    # compare against them (and refuse what the image does not carry).
    with anyio.fail_after(START_TIMEOUT):
        first = await podman_backend.start(SandboxSpec(name="clean", image=sandbox_image))
    await podman_backend.kill(first)
    real = _podman_api.create_kwargs

    def leaking(*args: Any, **kwargs: Any) -> dict[str, Any]:
        created = real(*args, **kwargs)
        created["environment"] = {"UPSTREAM_TOKEN": "from the host"}
        return created

    monkeypatch.setattr(_podman_api, "create_kwargs", leaking)
    with pytest.raises(SandboxStartError, match=r"empty environment \(found UPSTREAM_TOKEN\)"):
        await podman_backend.start(SandboxSpec(name="leaking", image=sandbox_image))
    assert "leaking" not in await _ours(podman_backend)


async def test_an_image_not_in_the_store_says_how_to_build_it_and_leaves_nothing(
    podman_backend: PodmanBackend, tmp_path: Path
) -> None:
    missing = "localhost/mcp-bridge-no-such-image:never"
    with pytest.raises(SandboxStartError, match="is not in podman's image store: build it with"):
        await podman_backend.start(SandboxSpec(name="imageless", image=missing))
    assert "imageless" not in await _ours(podman_backend)
    assert list((tmp_path / "state" / "sandboxes").glob("*/*")) == []  # per owner


async def test_a_start_asks_podman_nothing_while_the_sandbox_connects(
    podman_backend: PodmanBackend, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inspects while the sandbox's Python starts would be polls for its death: the held init's
    # pidfd says that, and gives the pid the connection's peer is checked against.
    if podman_backend.channel == "stdio":
        pytest.skip("the stdio channel waits on the attach stream, not on a connection")
    asked: list[str] = []
    inspect = _podman_api.inspect

    def counted(client: Any, name: str) -> dict[str, Any]:
        asked.append(name)
        return inspect(client, name)

    monkeypatch.setattr(_podman_api, "inspect", counted)
    sandbox = await podman_backend.start(
        SandboxSpec(name="unpolled", image=sandbox_image, connect_timeout=START_TIMEOUT)
    )
    try:
        # One to read back the applied seccomp filter, one to hold the started init.
        assert len(asked) == 2, asked
    finally:
        await podman_backend.kill(sandbox)


async def test_a_profile_file_changed_after_the_bridge_wrote_it_is_caught_and_never_run(
    podman_backend: PodmanBackend, sandbox_image: str, tmp_path: Path
) -> None:
    # What podman read is what counts (the OCI spec it wrote for crun), not the file's path.
    ours = podman_backend.seccomp
    assert ours is not None
    changed = json.loads(ours.path.read_text())
    changed["syscalls"].append({"names": ["clone3"], "action": "SCMP_ACT_ALLOW"})
    ours.path.write_text(json.dumps(changed))
    with pytest.raises(SandboxStartError, match=r"seccomp profile .*other rules for clone3"):
        await podman_backend.start(SandboxSpec(name="tampered", image=sandbox_image))
    assert "tampered" not in await _ours(podman_backend)
    assert list((tmp_path / "state" / "sandboxes").glob("*/*")) == []  # per owner


async def test_without_a_default_profile_to_build_on_no_sandbox_starts(
    podman_backend: PodmanBackend, sandbox_image: str
) -> None:
    podman_backend.seccomp = None
    podman_backend.seccomp_problem = "no default profile here"
    with pytest.raises(SandboxStartError, match="without the bridge's seccomp profile"):
        await podman_backend.start(SandboxSpec(name="unfiltered", image=sandbox_image))
    assert "unfiltered" not in await _ours(podman_backend)
    assert "UNAVAILABLE: no default profile here" in (await podman_backend.info()).seccomp


async def test_extra_security_options_are_applied_on_top_of_ours(
    podman_backend: PodmanBackend, sandbox_image: str
) -> None:
    spec = SandboxSpec(name="masked", image=sandbox_image, security_opt=("mask=/etc/hostname",))
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await podman_backend.start(spec)
    try:
        channel = Channel(sandbox.stream)
        await channel.handshake()
        shell = Shell(podman_backend, sandbox, channel)
        assert await shell.value("open('/etc/hostname').read()") == ""
        caps = await shell.value("open('/proc/self/status').read().split('CapEff:')[1].split()[0]")
        assert int(caps, 16) == 0
    finally:
        await podman_backend.kill(sandbox)


async def test_rootful_podman_reports_limits_as_enforced(podman_backend: PodmanBackend) -> None:
    info = await podman_backend.info()
    assert info.backend == "podman"
    assert info.version
    if not info.rootless:
        assert info.limits_enforced, info.detail
