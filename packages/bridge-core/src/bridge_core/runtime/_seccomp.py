"""The system-call filter of every sandbox: the runtime's default profile, narrowed.

The base is podman's default profile (containers-common), read from the same files podman reads.
It is written for general-purpose containers; a sandbox that runs untrusted Python with no
network, no capabilities and uid 65534 needs less. Everything below was measured on podman 4.3.1
/ crun 1.8.1 / libseccomp 2.5.4 (``integration-tests/battery/test_kernel_surface.py``).

What is taken away, group by group, and why. Every syscall named here is removed from every rule
of the base (allow rules, and the base's capability-dependent rules) and gets only the rules
below, so no rule of the base can re-allow it whatever libseccomp's merge order.

* **Namespaces** (``clone``, ``clone3``, ``unshare``, ``setns``). The base allows all four. In a
  new user namespace the sandbox holds a full capability set (measured: ``CapEff
  000001ffffffffff``) and can then mount, and reach nf_tables and fs-context code written for
  root only (CVE-2024-1086, CVE-2022-0185 and their family). ``clone`` and ``unshare`` stay
  allowed when no namespace flag is set (threads, fork, ``unshare(CLONE_FILES)``); with any
  namespace flag they fail with EPERM, the kernel's own answer to an unprivileged caller.
  ``clone3`` passes its flags in a struct that seccomp cannot read, so it is refused whole, with
  ENOSYS: glibc (2.34+) then falls back to ``clone`` for threads and ``posix_spawn``, which an
  EPERM would not do. ``setns`` is refused (EPERM): there is no namespace it may join.
* **Socket families** (``socket``, ``socketpair``). With ``--network=none`` the sandbox has only
  its own loopback, but socket families are not network interfaces: ``AF_VSOCK`` reaches the
  hypervisor's transport (measured on these VMs), ``AF_NETLINK`` the kernel's configuration
  interfaces (nf_tables is ``NETLINK_NETFILTER``), and any rarely used family makes the host
  kernel load its module on demand. Allowed: ``AF_UNIX`` (the channel, asyncio's self-pipe,
  multiprocessing) and ``AF_INET``/``AF_INET6`` (libraries that serve or probe on loopback:
  servers in tests, gRPC/ZeroMQ between local processes, urllib3's IPv6 probe at import), and
  for those two only the default, TCP and UDP protocols: SCTP, DCCP, L2TP, MPTCP and the like
  are modules or code no sandbox needs. Every other family fails with EAFNOSUPPORT, what a kernel
  built without it answers; other inet protocols with EPROTONOSUPPORT, likewise. ``AF_NETLINK``
  is refused whole, ``NETLINK_ROUTE`` included: glibc's ``getaddrinfo`` (even with
  ``AI_ADDRCONFIG``) falls back when it cannot open one (measured); what is lost is listing
  interfaces (``if_nameindex``, ``getifaddrs``), which in this sandbox can only ever show ``lo``.
  ``socketpair`` exists only for ``AF_UNIX``.
* **Compat system-call ABIs** (``archMap`` sub-architectures). The base also admits the 32-bit
  x86 ABI (``int 0x80`` works from any 64-bit process). On that ABI libseccomp rewrites every
  ``socket`` rule into a ``socketcall`` rule whose arguments are behind a pointer it cannot
  read, so the family filter would not hold there; the compat entry points are also a classic
  source of kernel bugs, and the sandbox image has no 32-bit code. Only the native ABI is
  listed; a compat system call then kills the calling thread (libseccomp's answer to an
  architecture the filter does not know, which the OCI spec cannot change). In the sandbox
  client's main thread the execution then ends at its timeout and the sandbox is replaced.
* **Mounting** (``mount``, ``umount2``, ``pivot_root``, ``chroot``, the new mount API ``fsopen``
  … ``mount_setattr``, swap and quota). The base allows ``mount`` and the whole fs-context family
  and leaves the refusal to the missing capability; with namespaces refused there is no
  capability to gain, and these calls go too (EPERM, as before: callers see no difference).
* **Kernel programming and introspection** (``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``syslog``, modules, ``kexec``, ``reboot``). Refused with EPERM. The base already refused most
  of them by capability; ``syslog`` it allows (the kernel log, where ``dmesg_restrict`` is 0).
* **Other processes** (``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``,
  ``pidfd_getfd``, ``process_madvise``). Only the sandbox's own processes are visible, but a
  sandbox needs no debugger, and ``pidfd_getfd`` would take descriptors from podman's init.
  EPERM, the answer a debugger gets under Yama.
* **io_uring** (``io_uring_setup``/``enter``/``register``). Its operations (open, socket,
  connect …) run in the kernel without passing through seccomp, so it would undo every filter
  above. ENOSYS: liburing, libuv and tokio then fall back to epoll.
* **Kernel keyrings** (``add_key``, ``keyctl``, ``request_key``). Not namespaced: without a
  user namespace every sandbox is host uid 65534, whose user keyring is one object shared by
  all sandboxes, a channel between sessions (measured). ENOSYS, like a kernel without keys.
* **File handles** (``name_to_handle_at``, ``open_by_handle_at``) and ``modify_ldt``: escape
  and exploit primitives with no use here. ENOSYS, like a kernel built without them; callers
  fall back.

Errno choices: EPERM where a privilege is what is missing (the kernel's own answer, which every
caller already handles), ENOSYS where callers must take a fallback path (``clone3``, io_uring),
EAFNOSUPPORT/EPROTONOSUPPORT for sockets (what a kernel built without that family or protocol
says). Whatever the base does not name keeps its default action (ENOSYS in podman's).

What stays, on purpose: SysV and POSIX IPC (the sandbox's own IPC namespace; multiprocessing),
``seccomp`` and ``landlock_*`` (code may confine itself further), ``pidfd_open`` (asyncio's child
watcher), ``personality`` as the base restricts it, NUMA memory policy calls (BLAS libraries),
and classic BPF socket filters (``setsockopt(SO_ATTACH_FILTER)``: a small interpreter without
the eBPF verifier; ``bpf()`` itself is refused, and filtering ``setsockopt`` by option would need
per-architecture option numbers).
"""

from __future__ import annotations

import errno
import hashlib
import json
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge_core.errors import SandboxStartError
from bridge_core.private_files import private_dir, write_private

__all__ = [
    "DEFAULT_PROFILES",
    "NAMESPACE_FLAGS",
    "OWNED_SYSCALLS",
    "PROFILE_NAME",
    "SeccompProfile",
    "SeccompUnavailable",
    "applied_profile_problems",
    "describe_filter",
    "profile_to_apply",
    "sandbox_profile",
    "sandbox_rules",
    "user_seccomp_option",
    "write_profile",
]

DEFAULT_PROFILES = (
    Path("/etc/containers/seccomp.json"),  # an administrator's override comes first, as in podman
    Path("/usr/share/containers/seccomp.json"),
)
PROFILE_NAME = "sandbox-seccomp.json"
_EARLIER_NAMES = ("seccomp-no-keyring.json",)  # what earlier versions wrote; removed when found

_ALLOW = "SCMP_ACT_ALLOW"
_ERRNO = "SCMP_ACT_ERRNO"

CLONE_NEWTIME = 0x80
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
"""Namespace flags ``clone`` accepts. ``unshare`` also takes CLONE_NEWTIME, whose bit ``clone``
uses for the exit signal."""

AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
IPPROTO_IP, IPPROTO_TCP, IPPROTO_UDP = 0, 6, 17
_INET_PROTOCOLS = (IPPROTO_IP, IPPROTO_TCP, IPPROTO_UDP)


@dataclass(frozen=True, slots=True)
class _Refusal:
    names: tuple[str, ...]
    errno: int
    comment: str


_REFUSALS = (
    _Refusal(("setns",), errno.EPERM, "namespaces: nothing to join"),
    _Refusal(
        ("clone3",),
        errno.ENOSYS,
        "namespaces: flags unreadable by seccomp; ENOSYS makes libc fall back to clone",
    ),
    _Refusal(
        (
            "mount",
            "umount",
            "umount2",
            "pivot_root",
            "chroot",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "move_mount",
            "open_tree",
            "mount_setattr",
            "swapon",
            "swapoff",
            "quotactl",
        ),
        errno.EPERM,
        "mounting: no use without privilege, reached fs-context parsers",
    ),
    _Refusal(
        (
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "syslog",
            "init_module",
            "finit_module",
            "delete_module",
            "kexec_load",
            "kexec_file_load",
            "reboot",
        ),
        errno.EPERM,
        "kernel programming and introspection",
    ),
    _Refusal(
        (
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
        ),
        errno.EPERM,
        "other processes: no debugger in a sandbox",
    ),
    _Refusal(
        ("io_uring_setup", "io_uring_enter", "io_uring_register"),
        errno.ENOSYS,
        "io_uring: its operations bypass seccomp; ENOSYS makes libraries fall back to epoll",
    ),
    _Refusal(
        ("add_key", "keyctl", "request_key"),
        errno.ENOSYS,
        "kernel keyrings: not namespaced, shared by every sandbox of uid 65534",
    ),
    _Refusal(
        ("name_to_handle_at", "open_by_handle_at", "modify_ldt"),
        errno.ENOSYS,
        "file handles and LDT: exploit primitives with no use here",
    ),
)

_FILTERED = ("clone", "unshare", "socket", "socketpair")
OWNED_SYSCALLS = frozenset([*_FILTERED, *(name for refusal in _REFUSALS for name in refusal.names)])
"""Every syscall whose rules this module writes; the base's rules for them are dropped."""


class SeccompUnavailable(Exception):
    """The bridge's profile cannot be built here (no readable default profile)."""


def _arg(index: int, value: int, op: str = "SCMP_CMP_EQ", value_two: int = 0) -> dict[str, Any]:
    return {"index": index, "value": value, "valueTwo": value_two, "op": op}


def _rule(
    name: str, args: Sequence[dict[str, Any]], errno_ret: int | None, comment: str
) -> dict[str, Any]:
    rule: dict[str, Any] = {"names": [name], "action": _ALLOW if errno_ret is None else _ERRNO}
    if errno_ret is not None:
        rule["errnoRet"] = errno_ret
    rule["args"] = list(args)
    rule["comment"] = comment
    return rule


def _namespace_rules(name: str, index: int, flags: Iterable[int]) -> list[dict[str, Any]]:
    """Allow ``name`` when no flag is set, EPERM when any is: no argument meets both answers.

    (libseccomp resolves overlapping rules of different actions by merge order, and crun splits
    two comparisons of one argument into two OR-ed rules, so each rule compares one thing.)
    """
    flags = sorted(flags)
    mask = sum(flags)
    rules = [_rule(name, [_arg(index, mask, "SCMP_CMP_MASKED_EQ", 0)], None, "no namespace flag")]
    rules += [
        _rule(
            name,
            [_arg(index, flag, "SCMP_CMP_MASKED_EQ", flag)],
            errno.EPERM,
            "namespaces: creating one is refused",
        )
        for flag in flags
    ]
    return rules


def _refuse_others(
    name: str,
    index: int,
    allowed: Sequence[int],
    errno_ret: int,
    comment: str,
    given: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Rules refusing every value of argument ``index`` that is not in ``allowed``.

    One EQ rule per value below the largest allowed one and a GT rule above it: a 64-bit
    comparison, so a value with its upper half set (the kernel reads an int) is refused too.
    ``given`` are comparisons on other arguments that every rule carries.
    """
    top = max(allowed)
    rules = [
        _rule(name, [*given, _arg(index, value)], errno_ret, comment)
        for value in range(top)
        if value not in allowed
    ]
    rules.append(_rule(name, [*given, _arg(index, top, "SCMP_CMP_GT")], errno_ret, comment))
    return rules


def _clone_flags_index(machine: str) -> int:
    # s390 swaps clone's first two arguments (stack first, then flags).
    return 1 if machine.startswith("s390") else 0


def sandbox_rules(machine: str | None = None) -> list[dict[str, Any]]:
    """The rules this module adds to the base (for the host's architecture by default)."""
    machine = machine or platform.machine()
    namespace_flags = list(NAMESPACE_FLAGS.values())
    rules = _namespace_rules("clone", _clone_flags_index(machine), namespace_flags)
    rules += _namespace_rules("unshare", 0, [*namespace_flags, CLONE_NEWTIME])
    families = "socket families: a network-less sandbox needs only unix and loopback inet"
    rules.append(_rule("socket", [_arg(0, AF_UNIX)], None, "unix sockets"))
    rules += _refuse_others("socket", 0, (AF_UNIX, AF_INET, AF_INET6), errno.EAFNOSUPPORT, families)
    for family in (AF_INET, AF_INET6):
        given = [_arg(0, family)]
        rules += [
            _rule("socket", [*given, _arg(2, protocol)], None, "inet: default, TCP or UDP")
            for protocol in _INET_PROTOCOLS
        ]
        rules += _refuse_others(
            "socket", 2, _INET_PROTOCOLS, errno.EPROTONOSUPPORT, "inet: other protocols", given
        )
    rules.append(_rule("socketpair", [_arg(0, AF_UNIX)], None, "unix socket pairs"))
    rules += _refuse_others("socketpair", 0, (AF_UNIX,), errno.EAFNOSUPPORT, "socketpair: unix")
    rules += [
        {
            "names": list(refusal.names),
            "action": _ERRNO,
            "errnoRet": refusal.errno,
            "args": [],
            "comment": refusal.comment,
        }
        for refusal in _REFUSALS
    ]
    return rules


def _narrowed(base: Mapping[str, Any], machine: str) -> dict[str, Any]:
    kept = []
    for rule in base["syscalls"]:
        if not isinstance(rule, dict):
            continue
        names = [name for name in rule.get("names", []) if name not in OWNED_SYSCALLS]
        if names:
            kept.append({**rule, "names": names})
    profile = {**base, "syscalls": kept + sandbox_rules(machine)}
    if isinstance(base.get("archMap"), list):
        profile["archMap"] = [
            {**entry, "subArchitectures": []}
            for entry in base["archMap"]
            if isinstance(entry, dict)
        ]
    return profile


@dataclass(frozen=True, slots=True)
class SeccompProfile:
    """The profile written for the sandboxes, with where its base came from."""

    path: Path
    content: dict[str, Any]
    base: Path

    @property
    def digest(self) -> str:
        """sha256 of the profile as written (what ``doctor`` shows)."""
        return hashlib.sha256(_serialise(self.content)).hexdigest()

    def describe(self) -> str:
        """One line for ``doctor`` and the logs."""
        return f"bridge profile sha256:{self.digest[:16]} (from {self.base}) at {self.path}"


def _serialise(profile: Mapping[str, Any]) -> bytes:
    return json.dumps(profile, indent=1, sort_keys=False).encode()


def sandbox_profile(
    sources: Sequence[Path] = DEFAULT_PROFILES, machine: str | None = None
) -> tuple[dict[str, Any], Path]:
    """The first readable default profile in ``sources``, narrowed; and where it was read.

    Raises :class:`SeccompUnavailable` naming the files tried when none is readable.
    """
    for source in sources:
        try:
            base = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(base, dict) and isinstance(base.get("syscalls"), list):
            return _narrowed(base, machine or platform.machine()), source
    raise SeccompUnavailable(
        "the sandbox's system-call filter is built from the container runtime's default "
        f"profile, and none is readable here (tried {', '.join(map(str, sources))}); install "
        "containers-common (Debian/Ubuntu: golang-github-containers-common), or name a "
        "profile of your own with MCP_BRIDGE_SECURITY_OPT=seccomp=PATH"
    )


def write_profile(state_dir: Path, sources: Sequence[Path] = DEFAULT_PROFILES) -> SeccompProfile:
    """Build the profile and write it to ``state_dir``: 0600 in a private directory (podman
    reads it as root or as this same user), replaced atomically (two bridges sharing a state
    dir never read half a file)."""
    content, base = sandbox_profile(sources)
    target = private_dir(state_dir) / PROFILE_NAME
    write_private(target, _serialise(content))
    for name in _EARLIER_NAMES:
        (state_dir / name).unlink(missing_ok=True)
    return SeccompProfile(target, content, base)


def user_seccomp_option(security_opt: Iterable[str]) -> str | None:
    """The profile a ``seccomp=`` (or docker's ``seccomp:``) option names, if any."""
    for option in security_opt:
        key, _, value = option.partition("=" if "=" in option else ":")
        if key == "seccomp" and value:
            return value
    return None


def profile_to_apply(
    security_opt: Iterable[str], profile: SeccompProfile | None, problem: str
) -> SeccompProfile | None:
    """The bridge's profile for a sandbox, or None when the user named a ``seccomp=`` of their
    own (their choice replaces ours). Raises :class:`SandboxStartError` when there is neither:
    a sandbox never runs under the runtime's unnarrowed default."""
    if user_seccomp_option(security_opt) is not None:
        return None
    if profile is None:
        raise SandboxStartError(
            f"refusing to start a sandbox without the bridge's seccomp profile: {problem}"
        )
    return profile


def describe_filter(profile: SeccompProfile | None, problem: str) -> str:
    """What ``doctor`` shows as the sandboxes' system-call filter."""
    return profile.describe() if profile is not None else f"UNAVAILABLE: {problem}"


def _normalised(rule: Mapping[str, Any]) -> tuple[Any, ...]:
    args = tuple(
        (a.get("index"), a.get("value", 0), a.get("valueTwo", 0), a.get("op"))
        for a in rule.get("args") or ()
    )
    errno_ret = rule.get("errnoRet") if rule.get("action") == _ERRNO else None
    return (tuple(sorted(rule.get("names") or ())), rule.get("action"), errno_ret, args)


def _architectures(profile: Mapping[str, Any]) -> set[str]:
    found = set(profile.get("architectures") or ())
    for entry in profile.get("archMap") or ():
        found.add(entry.get("architecture"))
        found.update(entry.get("subArchitectures") or ())
    return found


def applied_profile_problems(applied: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """What makes the filter a runtime applied (``applied``) differ from ours (``expected``).

    ``applied`` is either a profile file (docker keeps it verbatim) or the OCI runtime spec's
    ``linux.seccomp`` (podman converts the file: it drops rules whose capability or architecture
    condition does not hold and the comments). Both use the same rule keys. It is ours when the
    default action is ours, it admits no other architecture, every rule this module adds is
    there, no other rule names a syscall this module owns, and it allows nothing the expected
    profile does not allow somewhere.
    """
    problems = []
    for key in ("defaultAction", "defaultErrnoRet"):
        if applied.get(key) != expected.get(key):
            problems.append(f"default action {applied.get(key)!r} (want {expected.get(key)!r})")
    extra_arches = _architectures(applied) - _architectures(expected)
    if extra_arches:
        problems.append(f"extra system-call ABIs {', '.join(sorted(extra_arches))}")
    rules = [rule for rule in applied.get("syscalls") or () if isinstance(rule, Mapping)]
    present = {_normalised(rule) for rule in rules}
    ours = {_normalised(rule) for rule in sandbox_rules()}
    missing = sorted({name for rule in ours - present for name in rule[0]})
    if missing:
        problems.append(f"the bridge's rules for {', '.join(missing)}")
    foreign = sorted(
        {
            name
            for rule in rules
            if _normalised(rule) not in ours
            for name in rule.get("names") or ()
            if name in OWNED_SYSCALLS
        }
    )
    if foreign:
        problems.append(f"other rules for {', '.join(foreign)}")
    allowed_anywhere = {
        name
        for rule in expected.get("syscalls") or ()
        if rule.get("action") == _ALLOW
        for name in rule.get("names") or ()
    }
    extra = sorted(
        {name for rule in rules if rule.get("action") == _ALLOW for name in rule.get("names") or ()}
        - allowed_anywhere
        - OWNED_SYSCALLS  # reported above
    )
    if extra:
        problems.append(f"allows {', '.join(extra[:8])}{' …' if len(extra) > 8 else ''}")
    return problems
