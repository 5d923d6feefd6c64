"""Hostile code trying to leave the sandbox or gain privilege, through the real bridge (stdio, MCP
SDK client) and real podman.

Every probe is answered as an ordinary result (the attempt fails inside the sandbox with the
kernel's error), the bridge stays healthy, the next call works, and nothing reaches the host.
What the sandbox CAN see is asserted too, so the security doc can state it honestly.
"""

from __future__ import annotations

from ast import literal_eval
from pathlib import Path

import anyio
import pytest

from .conftest import RUNTIME_INIT, bridge_pids, code_text, open_bridge, text_of

pytestmark = [pytest.mark.container, pytest.mark.engine]


async def _next_call_works(bridge: object) -> None:
    after = await bridge.run("6 * 7")  # type: ignore[attr-defined]
    assert after.is_error is False
    assert text_of(after).endswith("42")


NETWORK = """
import os, socket
def attempt(label, action):
    try:
        action()
        print(label, "CONNECTED")
    except OSError as exc:
        print(label, type(exc).__name__, exc.errno)
tcp = socket.socket()
tcp.settimeout(5)
attempt("tcp", lambda: tcp.connect(("1.1.1.1", 443)))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("udp", lambda: udp.sendto(b"x", ("8.8.8.8", 53)))
attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
print("interfaces", os.listdir("/sys/class/net"))
"""


async def test_network_tcp_udp_dns_and_raw_sockets_all_fail_and_only_loopback_exists(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(NETWORK)
        await _next_call_works(bridge)
    out = code_text(probe)
    assert probe.is_error is False
    assert "CONNECTED" not in out
    assert "tcp OSError 101" in out  # ENETUNREACH: no route at all, not a slow timeout
    assert "udp OSError 101" in out
    assert "dns gaierror" in out
    # Refused by the bridge's seccomp profile before the kernel checks CAP_NET_RAW: only the
    # default, TCP and UDP inet protocols exist, and no packet sockets.
    assert "raw OSError 93" in out  # EPROTONOSUPPORT
    assert "packet OSError 97" in out  # EAFNOSUPPORT
    assert "interfaces ['lo']" in out


WRITES = """
import os
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("escaped")
        print("WROTE", path)
    except OSError as exc:
        print("refused", path, exc.errno)
"""


async def test_writes_outside_tmp_are_refused_and_never_reach_the_host(
    tmp_path: Path, sandbox_image: str, host_marker: Path
) -> None:
    refused = ["/etc/x", "/usr/x", "/x", "/run/bridge/x", "/run/x", "/var/tmp/x", "/root/x"]
    async with open_bridge(tmp_path) as bridge:
        # The host marker's absolute path does not exist in the container's filesystem.
        probe = await bridge.run(WRITES.format(paths=[*refused, str(host_marker)]))
        walk = await bridge.run(
            "import os\n"
            "[root for root, dirs, _ in os.walk('/') if not root.startswith(('/proc', '/sys'))"
            " and os.access(root, os.W_OK)]"
        )
        await _next_call_works(bridge)
    out = code_text(probe)
    assert "WROTE" not in out
    for path in refused:
        assert f"refused {path}" in out
    assert not await anyio.Path(host_marker).exists()
    # The only writable places: the sized /tmp, the runtime's /dev/shm (counts against the
    # memory limit) and the empty POSIX message-queue mount.
    assert set(literal_eval(code_text(walk))) <= {
        "/tmp",
        "/tmp/.matplotlib",
        "/dev/shm",
        "/dev/mqueue",
    }


HOST_FILES = """
import os
for path in ["/etc/shadow", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/host", {marker!r}]:
    try:
        data = open(path, "rb").read(64)
        print("READ", path, len(data))
    except OSError as exc:
        print("refused", path, exc.errno)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("pids", pids)
print("cmdlines", [open(f"/proc/{{p}}/cmdline", "rb").read().split(b"\\0")[0] for p in pids])
print("environ", sorted(os.environ))
print("cpuinfo", os.path.getsize("/proc/cpuinfo") >= 0)
"""


async def test_host_files_processes_and_environment_are_not_visible(
    tmp_path: Path, sandbox_image: str
) -> None:
    marker = tmp_path / "host-secret.txt"
    await anyio.Path(marker).write_text("host only")
    canary = "hostile-canary-7f3a9e"
    async with open_bridge(tmp_path, env={"BATTERY_CANARY": canary}) as bridge:
        probe = await bridge.run(HOST_FILES.format(marker=str(marker)))
        proc1 = await bridge.run("open('/proc/1/environ', 'rb').read()")
        await _next_call_works(bridge)
    out = code_text(probe)
    assert f"refused {marker} 2" in out  # the host's file does not exist in the sandbox
    # The image's own /etc/shadow is root-only (EACCES), or absent (ENOENT) where the image's
    # Debian no longer installs it by default (trixie's essential set has no `passwd`).
    assert "refused /etc/shadow 13" in out or "refused /etc/shadow 2" in out
    assert "refused /proc/kcore 2" in out
    assert "refused /host 2" in out
    # The runtime masks these kernel tables with an empty file.
    assert "READ /proc/keys 0" in out
    assert "READ /proc/timer_list 0" in out
    # Only the container's own processes: the runtime's init (PID 1) and the sandbox client
    # (PID 2 under podman; docker's setup uses a few pids of the namespace first).
    pids = literal_eval(next(line for line in out.splitlines() if line.startswith("pids "))[5:])
    assert len(pids) == 2, pids
    assert pids[0] == 1, pids
    assert f"cmdlines [b'{RUNTIME_INIT}', b'/opt/bridge/venv/bin/python']" in out
    assert canary not in out
    assert "BATTERY_CANARY" not in out
    assert canary not in str(proc1.model_dump(mode="json"))
    # Like any container, the kernel-wide /proc/cpuinfo, /proc/meminfo and /sys are readable.
    assert "cpuinfo True" in out


CAPABILITIES = """
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
print({key: status[key].strip() for key in
       ["Uid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]})
"""


async def test_no_capabilities_no_new_privileges_and_a_seccomp_filter(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(CAPABILITIES)
        await _next_call_works(bridge)
    seen = literal_eval(code_text(probe))
    assert seen["Uid"].split() == ["65534"] * 4
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]:
        assert int(seen[key], 16) == 0, key
    assert seen["NoNewPrivs"] == "1"
    assert seen["Seccomp"] == "2"


SETUID = """
import os, stat, subprocess
found = []
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys")):
        dirs[:] = []
        continue
    for name in files:
        try:
            if os.lstat(os.path.join(root, name)).st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.join(root, name))
        except OSError:
            pass
print("setuid", sorted(found))
su = subprocess.run(["/usr/bin/su", "-c", "id -u > /tmp/owned"], capture_output=True,
                    text=True, input="", timeout=20)
print("su", su.returncode, os.path.exists("/tmp/owned"))
"""


async def test_setuid_binaries_in_the_image_grant_nothing(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(SETUID, timeout=60)
        await _next_call_works(bridge)
    out = code_text(probe)
    # The Debian base keeps su, passwd & co. with their setuid bit; no_new_privileges and an empty
    # bounding set make the bit inert: su runs as nobody and fails.
    assert "setuid [" in out
    assert "su 1 False" in out


SYSCALLS = """
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = libc.syscall.restype = ctypes.c_long
def errno_of(result):
    return 0 if result == 0 else ctypes.get_errno()
print("mount", errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("umount", errno_of(libc.umount2(b"/run/bridge", 2)))
print("ptrace_attach_bridge", errno_of(libc.ptrace(16, {bridge_pid}, None, None)))
print("add_key", errno_of(libc.syscall(248, b"user", b"k", b"secret", 6, -3)))
print("request_key", errno_of(libc.syscall(249, b"user", b"k", None, -3)))
print("keyctl_user_keyring", errno_of(libc.syscall(250, 0, -4, 0, 0, 0)))
print("keyctl_join", errno_of(libc.syscall(250, 1, b"covert-channel", 0, 0, 0)))
try:
    os.mknod("/tmp/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    print("mknod 0")
except OSError as exc:
    print("mknod", exc.errno)
try:
    os.chroot("/tmp")
    print("chroot 0")
except OSError as exc:
    print("chroot", exc.errno)
"""


async def test_mount_ptrace_keyrings_mknod_and_chroot_are_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        (bridge_pid,) = bridge_pids(bridge.state_dir)
        probe = await bridge.run(SYSCALLS.format(bridge_pid=bridge_pid))
        await _next_call_works(bridge)
    found = dict(line.split() for line in code_text(probe).splitlines())
    assert found["mount"] == "1"  # EPERM
    assert found["umount"] == "1"
    # ptrace is refused by the bridge's seccomp profile (the runtime's default allows it; then
    # the answer was ESRCH: the bridge's host pid is not in the sandbox's PID namespace).
    assert found["ptrace_attach_bridge"] == "1"  # EPERM
    assert found["add_key"] == "38"  # ENOSYS: the seccomp filter refuses the keyring calls
    assert found["request_key"] == "38"
    # keyctl too (podman's default allows it): the user keyring of uid 65534 is one kernel object
    # shared by every sandbox, so a keyring linked there by one session could be read by another.
    assert found["keyctl_user_keyring"] == "38"
    assert found["keyctl_join"] == "38"
    assert found["mknod"] == "1"
    assert found["chroot"] == "1"
