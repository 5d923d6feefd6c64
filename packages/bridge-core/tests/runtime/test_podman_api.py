from pathlib import Path
from typing import Any

import pytest
from bridge_core.errors import ConfigError
from bridge_core.runtime import _podman_api
from bridge_core.runtime._podman_api import (
    LOG_MAX_BYTES,
    create_kwargs,
    inspect,
    limits_support,
    log_tail,
    security_opt_fields,
    socket_candidates,
)
from bridge_core.runtime.base import SandboxLimits, SandboxSpec
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR
from podman.errors import APIError, NotFound

SPEC = SandboxSpec(
    name="s",
    image="img",
    limits=SandboxLimits(memory_bytes=256 << 20, pids=64, cpu_quota=50_000, tmpfs_bytes=32 << 20),
)


def _kwargs(spec: SandboxSpec = SPEC) -> dict[str, Any]:
    return create_kwargs(
        spec,
        name="mcp-bridge-s-1",
        labels={"k": "v"},
        channel_dir=Path("/d"),
        log_path=Path("/logs/mcp-bridge-s-1.log"),
    )


def test_create_avoids_the_options_podman_py_breaks_or_drops() -> None:
    kwargs = _kwargs()
    assert "tmpfs" not in kwargs  # raises TypeError in podman-py
    assert "nano_cpus" not in kwargs  # silently dropped
    assert "security_opt" not in kwargs  # sent as SELinux options only
    assert kwargs["no_new_privileges"] is True
    assert "remove" not in kwargs  # dropped by create(): only run() reads it
    assert kwargs["auto_remove"] is True


def test_the_container_log_goes_to_the_given_file_with_a_cap() -> None:
    assert _kwargs()["log_config"] == {
        "Type": "k8s-file",
        "Config": {"path": "/logs/mcp-bridge-s-1.log", "size": LOG_MAX_BYTES},
    }


def test_log_tail_joins_partial_records_and_keeps_only_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "box.log"
    records = [f"2026-12-01T12:00:00.{i:09d}+00:00 stderr F line {i}" for i in range(30)]
    records.append("2026-12-01T12:00:01.000000000+00:00 stderr P cut ")
    records.append("2026-12-01T12:00:01.000000001+00:00 stderr F in two")
    log.write_text("\n".join(records) + "\n")
    assert log_tail(log, lines=3) == "line 28\nline 29\ncut in two"


def test_log_tail_of_a_missing_file_says_so(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "none.log").startswith("(logs unavailable:")


def test_create_requests_every_hardening_option() -> None:
    kwargs = _kwargs()
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["read_only"] is True
    assert kwargs["read_write_tmpfs"] is False
    assert kwargs["network_mode"] == "none"
    assert kwargs["user"] == "65534:65534"
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 256 << 20
    assert kwargs["pids_limit"] == 64
    assert (kwargs["cpu_quota"], kwargs["cpu_period"]) == (50_000, 100_000)
    assert kwargs["init"] is True
    assert kwargs["environment"] == {}
    assert {u["Name"] for u in kwargs["ulimits"]} == {"nofile", "nproc"}
    tmp, channel = kwargs["mounts"]
    assert tmp == {
        "type": "tmpfs",
        "source": "tmpfs",
        "target": "/tmp",
        "size": 32 << 20,
        "mode": "1777",
    }
    assert channel["source"] == "/d"
    assert channel["target"] == SANDBOX_CHANNEL_DIR
    assert channel["read_only"] is True


def test_no_cpu_quota_means_no_cpu_options() -> None:
    kwargs = _kwargs(SandboxSpec(name="s", image="img"))
    assert "cpu_quota" not in kwargs
    assert "cpu_period" not in kwargs


def test_extra_security_options_map_to_their_specgen_fields() -> None:
    fields = security_opt_fields(
        [
            "no-new-privileges",
            "seccomp=/etc/seccomp.json",
            "apparmor=my-profile",
            "label=type:container_t",
            "mask=/proc/a:/proc/b",
            "unmask=/proc/c",
        ]
    )
    assert fields == {
        "seccomp_profile_path": "/etc/seccomp.json",
        "apparmor_profile": "my-profile",
        "security_opt": ["type:container_t"],
        "masked_paths": ["/proc/a", "/proc/b"],
        "unmasked_paths": ["/proc/c"],
    }


@pytest.mark.parametrize("option", ["no-new-privileges=false", "systempaths=unconfined", "bogus"])
def test_security_options_podman_py_cannot_express_are_refused(option: str) -> None:
    with pytest.raises(ConfigError, match="not supported with the podman runtime"):
        security_opt_fields([option])


def test_container_host_is_tried_first_then_the_socket_of_our_uid() -> None:
    env = {"CONTAINER_HOST": "unix:///custom.sock", "XDG_RUNTIME_DIR": "/run/user/1000"}
    assert socket_candidates(env, 1000) == [
        "unix:///custom.sock",
        "unix:///run/user/1000/podman/podman.sock",
        "unix:///run/podman/podman.sock",
    ]
    assert socket_candidates({}, 0) == [
        "unix:///run/podman/podman.sock",
        "unix:///run/user/0/podman/podman.sock",
    ]


def test_limits_are_enforced_rootful_and_on_delegated_cgroup_v2_only() -> None:
    assert limits_support(False, "v1", []) == ""
    assert limits_support(True, "v2", ["cpu", "memory", "pids", "io"]) == ""
    assert "cgroup v1" in limits_support(True, "v1", ["cpu", "memory", "pids"])
    assert "memory, pids" in limits_support(True, "v2", ["cpu"])


class _Answers:
    """A podman client whose ``containers.get`` gives these answers in turn (errors are raised)."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.containers = self

    def get(self, name: str) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return type("Container", (), {"attrs": answer})()


def _exiting() -> APIError:
    cause = "read /proc/20217/cgroup: no such process"
    return APIError(cause, explanation=cause)


def test_inspect_retries_while_the_containers_process_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_podman_api, "_EXITING_RETRY_DELAY", 0)
    client = _Answers(_exiting(), ValueError("empty body"), {"State": {"Running": False}})
    assert inspect(client, "c") == {"State": {"Running": False}}  # type: ignore[arg-type]


def test_inspect_gives_up_on_an_exiting_process_after_its_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_podman_api, "_EXITING_RETRY_DELAY", 0)
    with pytest.raises(APIError, match="no such process"):
        inspect(_Answers(_exiting(), _exiting(), _exiting()), "c")  # type: ignore[arg-type]


def test_inspect_of_a_container_podman_no_longer_has_is_not_found() -> None:
    gone = APIError("x does not exist in database: no such container")
    with pytest.raises(NotFound):
        inspect(_Answers(gone), "c")  # type: ignore[arg-type]
