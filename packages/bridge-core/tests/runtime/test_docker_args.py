from pathlib import Path

from bridge_core.runtime._docker_cli import LOG_ROTATE_AT
from bridge_core.runtime.base import SandboxLimits, SandboxSpec
from bridge_core.runtime.docker import create_args


def test_docker_create_carries_every_hardening_flag_and_the_image_last() -> None:
    spec = SandboxSpec(
        name="s",
        image="localhost/img:1",
        limits=SandboxLimits(memory_bytes=256 << 20, pids=64, cpu_quota=50_000),
        security_opt=("seccomp=/p.json",),
    )
    args = create_args(spec, name="mcp-bridge-s-1", labels={"a": "b"}, channel_dir=Path("/d"))
    assert args[0] == "create"
    assert args[-1] == "localhost/img:1"
    for flag in (
        "--name=mcp-bridge-s-1",
        "--rm",
        "--user=65534:65534",
        "--cap-drop=ALL",
        "--read-only",
        "--security-opt=no-new-privileges",
        "--security-opt=seccomp=/p.json",
        "--network=none",
        "--sysctl=net.ipv6.conf.lo.disable_ipv6=0",
        f"--log-opt=max-size={LOG_ROTATE_AT}",
        "--log-opt=max-file=1",
        f"--memory={256 << 20}",
        f"--memory-swap={256 << 20}",
        "--pids-limit=64",
        f"--tmpfs=/tmp:rw,size={64 << 20},mode=1777",
        "--init",
        "--ulimit=nofile=1024:1024",
        "--ulimit=nproc=4096:4096",
        "--mount=type=bind,source=/d,target=/run/bridge,readonly",
        "--label=a=b",
        "--cpu-quota=50000",
        "--cpu-period=100000",
    ):
        assert flag in args, flag
    assert not any(arg.startswith(("--env", "-e")) for arg in args)


def test_docker_create_gives_the_sandbox_its_own_oom_cgroup_parent_when_asked() -> None:
    spec = SandboxSpec(name="s", image="img")
    args = create_args(
        spec, name="n", labels={}, channel_dir=Path("/d"), cgroup_parent="/mcp-bridge/n"
    )
    assert "--cgroup-parent=/mcp-bridge/n" in args
    assert not any(
        arg.startswith("--cgroup-parent")
        for arg in create_args(spec, name="n", labels={}, channel_dir=Path("/d"))
    )
