"""The sandboxes' system-call filter: the runtime's default profile, narrowed (pure tests).

The kernel side (what sandbox code actually gets) is proved in
``integration-tests/battery/test_kernel_surface.py``; here: how the profile is built, that its
argument rules never overlap (libseccomp resolves overlapping rules of different actions by
merge order), and how an applied profile is recognised as ours.
"""

from __future__ import annotations

import itertools
import json
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from bridge_core.errors import SandboxStartError
from bridge_core.runtime._docker_cli import applied_seccomp as _applied_seccomp
from bridge_core.runtime._docker_cli import create_args
from bridge_core.runtime._podman_api import create_kwargs
from bridge_core.runtime._seccomp import (
    CLONE_NEWTIME,
    DEFAULT_PROFILES,
    NAMESPACE_FLAGS,
    OWNED_SYSCALLS,
    PROFILE_NAME,
    SeccompUnavailable,
    applied_profile_problems,
    profile_to_apply,
    sandbox_profile,
    sandbox_rules,
    write_profile,
)
from bridge_core.runtime._verify import seccomp_violations
from bridge_core.runtime.base import SandboxSpec

EPERM, ENOSYS, EPROTONOSUPPORT, EAFNOSUPPORT = 1, 38, 93, 97
ALLOW = "SCMP_ACT_ALLOW"

BASE: dict[str, Any] = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 38,
    "archMap": [
        {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]}
    ],
    "syscalls": [
        {"names": ["read", "keyctl", "clone", "clone3", "socket", "write"], "action": ALLOW},
        {"names": ["setns", "bpf"], "action": ALLOW, "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["setns", "bpf"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["unshare"], "action": ALLOW},
        {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {
            "names": ["personality"],
            "action": ALLOW,
            "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}],
        },
    ],
}


def _base_file(tmp_path: Path, base: Mapping[str, Any] = BASE) -> Path:
    source = tmp_path / "default.json"
    source.write_text(json.dumps(base))
    return source


def _matches(rule: Mapping[str, Any], args: Sequence[int]) -> bool:
    for cmp in rule.get("args") or ():
        value, datum, op = cmp["value"], cmp.get("valueTwo", 0), cmp["op"]
        arg = args[cmp["index"]]
        if op == "SCMP_CMP_EQ" and arg != value:
            return False
        if op == "SCMP_CMP_GT" and not arg > value:
            return False
        if op == "SCMP_CMP_MASKED_EQ" and arg & value != datum:
            return False
        assert op in ("SCMP_CMP_EQ", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ"), op
    return True


def _outcome(name: str, *args: int, machine: str = "x86_64") -> int:
    """0 (allowed) or the errno of the rules of ours that match: at least one must, and all
    that do must agree (rules of different actions that overlap would be resolved by
    libseccomp's merge order)."""
    padded = [*args, *[0] * (6 - len(args))]
    outcomes = {
        0 if rule["action"] == ALLOW else int(rule["errnoRet"])
        for rule in sandbox_rules(machine)
        if name in rule["names"] and _matches(rule, padded)
    }
    assert len(outcomes) == 1, (name, args, outcomes)
    return outcomes.pop()


def test_owned_calls_leave_every_base_rule_and_get_only_ours(tmp_path: Path) -> None:
    profile, base = sandbox_profile([tmp_path / "missing.json", _base_file(tmp_path)], "x86_64")
    assert base == tmp_path / "default.json"
    ours = sandbox_rules("x86_64")
    assert profile["syscalls"][len(profile["syscalls"]) - len(ours) :] == ours
    kept = profile["syscalls"][: len(profile["syscalls"]) - len(ours)]
    assert kept == [
        {"names": ["read", "write"], "action": ALLOW},
        BASE["syscalls"][5],  # not ours: untouched, conditions included
    ]
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["defaultErrnoRet"] == ENOSYS
    # The 32-bit ABIs are gone: libseccomp turns socket rules into unfilterable socketcall there.
    assert profile["archMap"] == [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []}]


def test_namespace_flags_are_refused_with_eperm_and_everything_else_allowed() -> None:
    flags = list(NAMESPACE_FLAGS.values())
    thread = 0x003D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|...
    for count in range(len(flags) + 1):
        for chosen in itertools.combinations(flags, count):
            wanted = EPERM if chosen else 0
            assert _outcome("clone", sum(chosen) | thread | 17) == wanted
            assert _outcome("clone", (1 << 40) | sum(chosen)) == wanted
            assert _outcome("unshare", sum(chosen) | 0x400) == wanted
    assert _outcome("unshare", CLONE_NEWTIME) == EPERM
    assert _outcome("clone", 0, NAMESPACE_FLAGS["CLONE_NEWUSER"], machine="s390x") == EPERM
    assert _outcome("clone", NAMESPACE_FLAGS["CLONE_NEWUSER"], 0, machine="s390x") == 0


def test_each_socket_family_and_inet_protocol_meets_exactly_one_rule() -> None:
    families = [*range(64), 1 << 32 | 1, 1 << 32 | 40, 2**64 - 1]
    for family in families:
        for protocol in [*range(300), 1 << 32 | 6, 2**64 - 1]:
            got = _outcome("socket", family, 1, protocol)
            if family == 1:
                assert got == 0
            elif family in (2, 10):
                assert got == (0 if protocol in (0, 6, 17) else EPROTONOSUPPORT), protocol
            else:
                assert got == EAFNOSUPPORT, family
        assert _outcome("socketpair", family, 1, 0) == (0 if family == 1 else EAFNOSUPPORT)


def test_every_other_owned_call_is_refused_whatever_its_arguments() -> None:
    filtered = {"clone", "unshare", "socket", "socketpair"}
    for name in sorted(OWNED_SYSCALLS - filtered):
        assert _outcome(name, 0, 1, 2) in (EPERM, ENOSYS), name
    assert _outcome("clone3", 0, 0) == ENOSYS
    assert _outcome("io_uring_setup", 1, 0) == ENOSYS
    assert _outcome("setns", 3, 0) == EPERM
    assert _outcome("ptrace", 16, 1) == EPERM


def test_the_installed_default_profile_narrowed_keeps_every_other_allowed_call() -> None:
    installed = [path for path in DEFAULT_PROFILES if path.is_file()]
    if not installed:
        pytest.skip("no containers-common default profile installed here")
    base = json.loads(installed[0].read_text())
    profile, _ = sandbox_profile(installed)

    def allowed(rules: Sequence[Mapping[str, Any]]) -> set[str]:
        return {n for rule in rules if rule["action"] == ALLOW and not rule.get("args")
                for n in rule["names"]}  # fmt: skip

    assert allowed(profile["syscalls"]) == allowed(base["syscalls"]) - OWNED_SYSCALLS
    assert applied_profile_problems(profile, profile) == []
    # podman's own default is recognised as NOT ours, naming what differs.
    problems = applied_profile_problems(base, profile)
    abis = next(p for p in problems if p.startswith("extra system-call ABIs "))
    assert "SCMP_ARCH_X86" in abis.removeprefix("extra system-call ABIs ").split(", ")
    assert any(p.startswith("the bridge's rules for ") and "clone" in p for p in problems)
    assert any(p.startswith("other rules for ") and "unshare" in p for p in problems)


def _as_oci(profile: Mapping[str, Any]) -> dict[str, Any]:
    """What podman writes into the OCI spec (a container with no capabilities, x86_64)."""
    syscalls = []
    for rule in profile["syscalls"]:
        if (rule.get("includes") or {}).get("caps"):
            continue
        converted = {"names": rule["names"], "action": rule["action"]}
        if "errnoRet" in rule:
            converted["errnoRet"] = rule["errnoRet"]
        if rule.get("args"):
            converted["args"] = [
                {k: v for k, v in arg.items() if not (k == "valueTwo" and v == 0)}
                for arg in rule["args"]
            ]
        syscalls.append(converted)
    return {
        "defaultAction": profile["defaultAction"],
        "defaultErrnoRet": profile["defaultErrnoRet"],
        "architectures": [entry["architecture"] for entry in profile["archMap"]],
        "syscalls": syscalls,
    }


def test_an_applied_profile_is_ours_only_with_every_rule_and_nothing_more(tmp_path: Path) -> None:
    ours, _ = sandbox_profile([_base_file(tmp_path)])
    applied = _as_oci(ours)
    assert applied_profile_problems(applied, ours) == []

    clone3 = {"names": ["clone3"], "action": ALLOW}
    reallowed = {**applied, "syscalls": [*applied["syscalls"], clone3]}
    assert applied_profile_problems(reallowed, ours) == ["other rules for clone3"]
    missing = {**applied, "syscalls": [r for r in applied["syscalls"] if r["names"] != ["socket"]]}
    assert applied_profile_problems(missing, ours) == ["the bridge's rules for socket"]
    compat = {**applied, "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"]}
    assert applied_profile_problems(compat, ours) == ["extra system-call ABIs SCMP_ARCH_X86"]
    more = {**applied, "syscalls": [*applied["syscalls"], {"names": ["iopl"], "action": ALLOW}]}
    assert applied_profile_problems(more, ours) == ["allows iopl"]
    permissive = {**applied, "defaultAction": "SCMP_ACT_ALLOW"}
    assert applied_profile_problems(permissive, ours) == [
        "default action 'SCMP_ACT_ALLOW' (want 'SCMP_ACT_ERRNO')"
    ]


def test_the_written_profile_is_private_and_replaced_whole(tmp_path: Path) -> None:
    source = _base_file(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "seccomp-no-keyring.json").write_text("{}")  # an earlier version's
    first = write_profile(tmp_path / "state", [source])
    second = write_profile(tmp_path / "state", [source])
    assert first.path == second.path == tmp_path / "state" / PROFILE_NAME
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert json.loads(first.path.read_text()) == first.content
    assert first.digest == second.digest
    assert [p.name for p in (tmp_path / "state").iterdir()] == [PROFILE_NAME]
    assert first.describe().startswith(f"bridge profile sha256:{first.digest[:16]} (from {source})")


def test_no_readable_default_profile_is_a_clear_error_naming_files_and_fixes(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(SeccompUnavailable) as caught:
        sandbox_profile([tmp_path / "missing.json", broken])
    message = str(caught.value)
    assert str(broken) in message
    assert "containers-common" in message
    assert "MCP_BRIDGE_SECURITY_OPT=seccomp=PATH" in message


def test_without_our_profile_a_sandbox_starts_only_with_the_users_own(tmp_path: Path) -> None:
    ours = write_profile(tmp_path, [_base_file(tmp_path)])
    assert profile_to_apply((), ours, "") is ours
    assert profile_to_apply(("seccomp=/mine.json",), ours, "") is None
    assert profile_to_apply(("seccomp:/mine.json",), None, "no base") is None
    with pytest.raises(SandboxStartError, match="without the bridge's seccomp profile: no base"):
        profile_to_apply(("label=disable",), None, "no base")


def test_the_profile_is_sent_to_podman_and_docker_unless_the_user_names_a_seccomp_option() -> None:
    ours = Path("/state") / PROFILE_NAME
    spec = SandboxSpec(name="s", image="i")
    sent = create_kwargs(spec, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert sent["seccomp_profile_path"] == str(ours)
    args = create_args(spec, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert f"--security-opt=seccomp={ours}" in args

    theirs = SandboxSpec(name="s", image="i", security_opt=("seccomp=/mine.json",))
    sent = create_kwargs(theirs, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert sent["seccomp_profile_path"] == "/mine.json"
    args = create_args(theirs, name="n", labels={}, channel_dir=Path("/d"), seccomp_profile=ours)
    assert [a for a in args if "seccomp" in a] == ["--security-opt=seccomp=/mine.json"]


def test_docker_keeps_the_profile_in_security_opt_and_it_is_checked_there(tmp_path: Path) -> None:
    ours, _ = sandbox_profile([_base_file(tmp_path)])
    compact = json.dumps(ours, separators=(",", ":"))  # what the docker CLI sends
    inspect = {"HostConfig": {"SecurityOpt": ["no-new-privileges", f"seccomp={compact}"]}}
    assert seccomp_violations(_applied_seccomp(inspect), ours) == []
    default_only = {"HostConfig": {"SecurityOpt": ["no-new-privileges"]}}
    assert seccomp_violations(_applied_seccomp(default_only), ours) == [
        "the bridge's seccomp profile (not applied)"
    ]
