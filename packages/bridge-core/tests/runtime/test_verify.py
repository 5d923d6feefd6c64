import copy
from typing import Any

import pytest
from bridge_core.runtime._verify import (
    hardening_violations,
    lifecycle_violations,
    parse_human_size,
    parse_size,
)
from bridge_core.runtime.base import OWNER_LABEL, PRODUCT_LABEL, SandboxLimits, SandboxSpec

SPEC = SandboxSpec(name="s", image="img", limits=SandboxLimits(cpu_quota=50_000))
IMAGE_ENV = ["PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"]

# The shape of `podman container inspect` (4.3) for a correctly hardened sandbox.
GOOD: dict[str, Any] = {
    "EffectiveCaps": [],
    "Mounts": [{"Type": "bind", "Destination": "/run/bridge"}],
    "Config": {
        "User": "65534:65534",
        "Env": ["container=podman", "PATH=/usr/bin:/bin", "TERM=xterm", "PYTHONUNBUFFERED=1"],
        "Labels": {PRODUCT_LABEL: "sandbox", OWNER_LABEL: "1:2"},
    },
    "HostConfig": {
        "CapAdd": [],
        "CapDrop": ["CAP_CHOWN", "CAP_KILL"],
        "ReadonlyRootfs": True,
        "SecurityOpt": ["no-new-privileges"],
        "NetworkMode": "none",
        "Memory": 512 * 1024 * 1024,
        "MemorySwap": 512 * 1024 * 1024,
        "PidsLimit": 128,
        "CpuQuota": 50_000,
        "CpuPeriod": 100_000,
        "Tmpfs": {"/tmp": "size=67108864,mode=1777,rw,rprivate,nosuid,nodev,tmpcopyup"},
        "Init": True,
        "Ulimits": [
            {"Name": "RLIMIT_NOFILE", "Soft": 1024, "Hard": 1024},
            {"Name": "RLIMIT_NPROC", "Soft": 4096, "Hard": 4096},
        ],
    },
}


def _broken(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    *parents, leaf = path.split(".")
    target = data
    for key in parents:
        target = target[key]
    target[leaf] = value
    return data


def test_a_fully_hardened_container_has_no_violations() -> None:
    assert hardening_violations(GOOD, SPEC, image_env=IMAGE_ENV) == []


def test_docker_inspect_shapes_are_understood_too() -> None:
    data = _broken("HostConfig.CapDrop", ["ALL"])
    del data["EffectiveCaps"]
    data["HostConfig"]["Tmpfs"] = {"/tmp": "rw,size=64m,mode=1777"}
    data["HostConfig"]["Ulimits"] = [
        {"Name": "nofile", "Soft": 1024, "Hard": 1024},
        {"Name": "nproc", "Soft": 4096, "Hard": 4096},
    ]
    assert hardening_violations(data, SPEC, image_env=IMAGE_ENV) == []


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("EffectiveCaps", ["CAP_CHOWN"], "cap-drop=ALL"),
        ("HostConfig.CapAdd", ["CAP_NET_RAW"], "cap-drop=ALL"),
        ("HostConfig.ReadonlyRootfs", False, "read-only root"),
        ("HostConfig.SecurityOpt", [], "no-new-privileges"),
        ("HostConfig.NetworkMode", "bridge", "network=none"),
        ("Config.User", "0:0", "user 65534:65534"),
        ("HostConfig.Memory", 0, "memory="),
        ("HostConfig.MemorySwap", -1, "memory-swap="),
        ("HostConfig.PidsLimit", 2048, "pids-limit="),
        ("HostConfig.CpuQuota", 0, "cpu-quota="),
        ("HostConfig.Tmpfs", {}, "tmpfs /tmp"),
        ("HostConfig.Tmpfs", {"/tmp": "size=1g,mode=1777"}, "tmpfs /tmp"),
        ("HostConfig.Tmpfs", {"/tmp": "size=67108864,mode=755"}, "tmpfs /tmp"),
        ("HostConfig.Init", False, "init"),
        ("HostConfig.Ulimits", [], "ulimit nofile"),
        ("Config.Labels", {}, "ownership labels"),
        ("Config.Env", ["PATH=/bin", "AWS_SECRET_ACCESS_KEY=x"], "AWS_SECRET_ACCESS_KEY"),
    ],
)
def test_each_missing_option_is_named(path: str, value: Any, named: str) -> None:
    problems = hardening_violations(_broken(path, value), SPEC, image_env=IMAGE_ENV)
    assert any(named in problem for problem in problems), problems


def test_writable_run_and_var_tmp_are_reported() -> None:
    data = copy.deepcopy(GOOD)
    data["HostConfig"]["Tmpfs"].update({"/run": "rw", "/var/tmp": "rw"})
    problems = hardening_violations(data, SPEC, image_env=IMAGE_ENV)
    assert problems == ["read-only-tmpfs=false (/run, /var/tmp writable)"]


def test_cpu_quota_is_not_required_when_unset() -> None:
    spec = SandboxSpec(name="s", image="img")
    data = _broken("HostConfig.CpuQuota", 0)
    assert hardening_violations(data, spec, image_env=IMAGE_ENV) == []


def test_sizes_parse_with_and_without_units() -> None:
    assert parse_size("67108864") == 64 * 1024 * 1024
    assert parse_size("64m") == 64 * 1024 * 1024
    assert parse_size("65536k") == 64 * 1024 * 1024
    assert parse_size("lots") is None


LOG = "/state/sandboxes/1-2/box.log"
# What podman 4.3 shows for auto_remove=True and a k8s-file log capped at 1 MiB.
LIFECYCLE: dict[str, Any] = {
    "HostConfig": {
        "AutoRemove": True,
        "LogConfig": {"Type": "k8s-file", "Path": LOG, "Tag": "", "Size": "1.049MB"},
    }
}


def test_auto_removal_and_a_capped_log_pass() -> None:
    assert lifecycle_violations(LIFECYCLE, log_path=LOG, log_max_bytes=1 << 20) == []


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("AutoRemove", False, "auto-remove"),
        ("LogConfig", {"Type": "k8s-file", "Path": LOG, "Size": "0B"}, "capped"),
        ("LogConfig", {"Type": "k8s-file", "Path": LOG, "Size": "2.1MB"}, "capped"),
        ("LogConfig", {"Type": "k8s-file", "Path": "/other.log", "Size": "1MB"}, "log path"),
    ],
)
def test_a_container_that_would_outlive_its_end_or_log_without_bound_is_named(
    key: str, value: Any, named: str
) -> None:
    data = copy.deepcopy(LIFECYCLE)
    data["HostConfig"][key] = value
    problems = lifecycle_violations(data, log_path=LOG, log_max_bytes=1 << 20)
    assert any(named in problem for problem in problems), problems


def test_podman_human_sizes_parse() -> None:
    assert parse_human_size("65.54kB") == pytest.approx(65_540)
    assert parse_human_size("1.049MB") == pytest.approx(1_049_000)
    assert parse_human_size("0B") == 0
    assert parse_human_size("") is None
    assert parse_human_size("big") is None
