"""The podman sandboxes' system-call filter: the runtime's default minus the keyring calls."""

from __future__ import annotations

import json
from pathlib import Path

from bridge_core.runtime._podman_api import create_kwargs
from bridge_core.runtime._seccomp import DEFAULT_PROFILES, KEYRING_SYSCALLS, keyring_free_profile
from bridge_core.runtime.base import SandboxSpec

DEFAULT = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 38,
    "syscalls": [
        {"names": ["read", "keyctl", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["keyctl"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ],
}


def test_keyring_calls_leave_every_allow_rule_and_are_refused_with_enosys(tmp_path: Path) -> None:
    source = tmp_path / "default.json"
    source.write_text(json.dumps(DEFAULT))
    written = keyring_free_profile(tmp_path / "state", [tmp_path / "missing.json", source])
    assert written is not None
    profile = json.loads(written.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["syscalls"] == [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": list(KEYRING_SYSCALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    ]


def test_no_readable_default_profile_keeps_the_runtime_default(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert keyring_free_profile(tmp_path, [tmp_path / "missing.json", broken]) is None


def test_the_installed_podman_default_allows_keyctl_and_ours_does_not(tmp_path: Path) -> None:
    installed = [path for path in DEFAULT_PROFILES if path.is_file()]
    if not installed:
        return  # no podman installed here: nothing to derive from
    allowed = {
        name
        for rule in json.loads(installed[0].read_text())["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    written = keyring_free_profile(tmp_path)
    assert written is not None
    ours = {
        name
        for rule in json.loads(written.read_text())["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    assert ours == allowed - set(KEYRING_SYSCALLS)


def test_the_profile_is_sent_unless_the_user_names_a_seccomp_option() -> None:
    spec = SandboxSpec(name="s", image="i")
    ours = Path("/state/seccomp-no-keyring.json")
    sent = create_kwargs(spec, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert sent["seccomp_profile_path"] == str(ours)
    theirs = SandboxSpec(name="s", image="i", security_opt=("seccomp=/mine.json",))
    sent = create_kwargs(theirs, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert sent["seccomp_profile_path"] == "/mine.json"
