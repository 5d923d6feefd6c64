"""Hostile code reaching for kernel interfaces a network-less sandbox has no use for, through the
real bridge (stdio, MCP SDK client) and real podman: namespaces, socket families, the 32-bit
system-call ABI and the kernel's programming and debugging interfaces are refused by the
bridge's seccomp profile (``bridge_core.runtime._seccomp``), while ordinary workloads (threads,
fork, posix_spawn, multiprocessing, asyncio on loopback, numpy and pandas of the standard image)
still run under it.

Each attempt that could change the sandbox process (a namespace that IS created on a runtime
without the filter) runs in a forked child that reports the errno as its exit status, so one
probe never depends on another. System-call numbers are x86_64's.
"""

from __future__ import annotations

import platform
from ast import literal_eval
from pathlib import Path

import pytest

from .conftest import open_bridge, payload_of, stdout_of, text_of

pytestmark = [
    pytest.mark.engine,
    pytest.mark.container,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="system-call numbers are x86_64's"),
]

EPERM, ENOSYS, EPROTONOSUPPORT, EAFNOSUPPORT = 1, 38, 93, 97

# Runs first in every probe: `attempt(name, fn)` records fn's errno (0 = it worked) from a child.
HELPERS = """
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = {}
def attempt(name, call):
    pid = os.fork()
    if pid == 0:
        try:
            result = call()
            os._exit(0 if result is None or result >= 0 else ctypes.get_errno())
        except OSError as exc:
            os._exit(exc.errno)
        except BaseException:
            os._exit(255)
    found[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
def sys_(number, *args):
    return lambda: libc.syscall(number, *args)
"""

NAMESPACES = (
    HELPERS
    + """
NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME = (
    0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x80)
SIGCHLD = 17
def clone(flags):  # fork-like raw clone: the child returns 0 and leaves at once
    def call():
        pid = libc.syscall(56, flags | SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
        return pid
    return call
for name, flag in [("user", NEWUSER), ("mount", NEWNS), ("net", NEWNET), ("pid", NEWPID),
                   ("ipc", NEWIPC), ("uts", NEWUTS), ("cgroup", NEWCGROUP)]:
    attempt("unshare_" + name, lambda flag=flag: libc.unshare(flag))
    attempt("clone_" + name, clone(flag))
attempt("unshare_time", lambda: libc.unshare(NEWTIME))
attempt("unshare_user_and_mount", lambda: libc.unshare(NEWUSER | NEWNS))
attempt("unshare_files", lambda: libc.unshare(0x400))  # CLONE_FILES: no namespace, still fine
attempt("clone_plain", clone(0))
own_user_ns = os.open("/proc/self/ns/user", os.O_RDONLY)
attempt("setns", sys_(308, own_user_ns, 0))
attempt("clone3", sys_(435, 0, 0))
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
found["CapEff"] = status["CapEff"].strip()
found["Seccomp"] = status["Seccomp"].strip()
print(found)
"""
)


async def test_no_namespace_can_be_created_by_unshare_clone_clone3_or_setns(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(NAMESPACES)
        after = await bridge.run("6 * 7")
    assert probe.is_error is False, text_of(probe)
    found = literal_eval(stdout_of(probe))
    for kind in ("user", "mount", "net", "pid", "ipc", "uts", "cgroup"):
        assert found[f"unshare_{kind}"] == EPERM, kind
        assert found[f"clone_{kind}"] == EPERM, kind
    assert found["unshare_time"] == EPERM
    assert found["unshare_user_and_mount"] == EPERM
    assert found["setns"] == EPERM
    # Its flags are in a struct seccomp cannot read: refused whole, with the answer that makes
    # libc fall back to clone.
    assert found["clone3"] == ENOSYS
    # What needs no namespace is untouched.
    assert found["unshare_files"] == 0
    assert found["clone_plain"] == 0
    assert found["CapEff"] == "0000000000000000"
    assert found["Seccomp"] == "2"
    assert text_of(after).endswith("42")


SOCKETS = (
    HELPERS
    + """
def sock(family, kind, proto=0):
    return lambda: socket.socket(family, kind, proto).close()
attempt("vsock", sock(40, socket.SOCK_STREAM))
attempt("netlink_netfilter", sock(16, socket.SOCK_RAW, 12))
attempt("netlink_route", sock(16, socket.SOCK_RAW, 0))
attempt("netlink_uevent", sock(16, socket.SOCK_DGRAM, 15))
attempt("packet", sock(17, socket.SOCK_RAW))
attempt("alg", sock(38, socket.SOCK_SEQPACKET))
attempt("bluetooth", sock(31, socket.SOCK_STREAM))
attempt("tipc", sock(30, socket.SOCK_RDM))
attempt("can", sock(29, socket.SOCK_RAW))
attempt("xdp", sock(44, socket.SOCK_RAW))
attempt("key", sock(15, socket.SOCK_RAW, 2))
attempt("unspec", sock(0, socket.SOCK_STREAM))
# The kernel reads the family as an int: a value with its upper half set is the same family.
attempt("vsock_upper_bits", sys_(41, (1 << 32) | 40, 1, 0))
attempt("sctp", sock(2, socket.SOCK_STREAM, 132))
attempt("sctp6", sock(10, socket.SOCK_SEQPACKET, 132))
attempt("mptcp", sock(2, socket.SOCK_STREAM, 262))
attempt("icmp", sock(2, socket.SOCK_DGRAM, 1))
attempt("socketpair_inet", sys_(53, 2, 1, 0, ctypes.create_string_buffer(8)))
# What a sandbox does use: unix sockets and loopback TCP/UDP.
left, right = socket.socketpair()
left.send(b"unix"); found["socketpair"] = right.recv(4).decode()
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept(); client.send(b"tcp"); found["loopback_tcp"] = peer.recv(3).decode()
udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); udp.bind(("::1", 0))
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b"udp6", udp.getsockname())
found["loopback_udp6"] = udp.recv(4).decode()
found["getaddrinfo_addrconfig"] = sorted({a[4][0] for a in socket.getaddrinfo(
    "localhost", 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)})
try:
    socket.if_nameindex()
    found["if_nameindex"] = 0
except OSError as exc:
    found["if_nameindex"] = exc.errno
print(found)
"""
)


async def test_socket_families_beyond_unix_and_loopback_inet_are_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(SOCKETS)
    assert probe.is_error is False, text_of(probe)
    found = literal_eval(stdout_of(probe))
    for family in (
        "vsock",  # the hypervisor's transport: a way around --network=none
        "netlink_netfilter",  # nf_tables
        "netlink_route",
        "netlink_uevent",
        "packet",
        "alg",
        "bluetooth",
        "tipc",
        "can",
        "xdp",
        "key",
        "unspec",
        "vsock_upper_bits",
        "socketpair_inet",
    ):
        assert found[family] == EAFNOSUPPORT, family
    for protocol in ("sctp", "sctp6", "mptcp", "icmp"):
        assert found[protocol] == EPROTONOSUPPORT, protocol
    assert found["socketpair"] == "unix"
    assert found["loopback_tcp"] == "tcp"
    assert found["loopback_udp6"] == "udp6"
    # glibc's getaddrinfo falls back when it cannot ask netlink which addresses exist; listing
    # interfaces (only `lo` here) is what is lost. Which loopback addresses come back is the
    # runtime's /etc/hosts (docker lists ::1 for localhost, podman does not).
    assert "127.0.0.1" in found["getaddrinfo_addrconfig"]
    assert set(found["getaddrinfo_addrconfig"]) <= {"127.0.0.1", "::1"}
    assert found["if_nameindex"] == EAFNOSUPPORT


# socketcall(SYS_SOCKET, {AF_VSOCK, SOCK_STREAM, 0}) through `int 0x80`, the 32-bit ABI that any
# 64-bit process can enter: seccomp cannot read socketcall's arguments, so only refusing the
# whole ABI keeps the family filter. Run in a child: the kernel kills the calling thread.
COMPAT_CHILD = r"""
import ctypes
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)  # RWX, private, anonymous, MAP_32BIT
args = (ctypes.c_uint32 * 3).from_address(page + 2048)
args[0], args[1], args[2] = 40, 1, 0
# push rbx; mov eax, 102 (socketcall); mov ebx, 1 (SYS_SOCKET); mov ecx, args; int 0x80;
# movsxd rax, eax; pop rbx; ret
code = (b"\x53\xb8\x66\x00\x00\x00\xbb\x01\x00\x00\x00\xb9"
        + (page + 2048).to_bytes(4, "little") + b"\xcd\x80\x48\x63\xc0\x5b\xc3")
ctypes.memmove(page, code, len(code))
print("fd", ctypes.CFUNCTYPE(ctypes.c_long)(page)(), flush=True)
"""
COMPAT_ABI = f"""
import subprocess, sys
done = subprocess.run([sys.executable, "-c", {COMPAT_CHILD!r}], capture_output=True, text=True,
                      timeout=60)
print(done.returncode, repr(done.stdout))
"""


async def test_the_32_bit_system_call_abi_cannot_open_a_refused_socket_family(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(COMPAT_ABI)
        after = await bridge.run("6 * 7")
    assert probe.is_error is False, text_of(probe)
    returncode, stdout = stdout_of(probe).split(maxsplit=1)
    assert literal_eval(stdout) == ""  # no descriptor came back
    assert int(returncode) == -31  # SIGSYS: the filter knows no 32-bit ABI
    assert text_of(after).endswith("42")


async def test_a_32_bit_system_call_in_the_main_thread_ends_at_the_timeout_with_a_new_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The kernel kills only the calling thread; the sandbox client's main thread runs the code,
    # so the execution never ends by itself: the timeout bounds it and the sandbox is replaced.
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        ended = await bridge.run(COMPAT_CHILD, timeout=5)
        after = await bridge.run("'kept' in globals()")
    assert payload_of(ended)["status"] == "timeout"
    assert "fd" not in stdout_of(ended)
    # A new sandbox, holding the session's last good state (durable sessions).
    assert text_of(after).endswith("True")
    assert any("restored" in notice for notice in payload_of(after)["notices"])


KERNEL_INTERFACES = (
    HELPERS
    + """
buffer = ctypes.create_string_buffer(256)
attempt("io_uring_setup", sys_(425, 1, buffer))
attempt("bpf", sys_(321, 0, buffer, 48))
attempt("perf_event_open", sys_(298, buffer, 0, -1, -1, 0))
attempt("userfaultfd", sys_(323, 0))
attempt("syslog", sys_(103, 10, 0, 0))
attempt("ptrace_traceme", sys_(101, 0, 0, 0, 0))
local = (ctypes.c_char * 8)(); iov = (ctypes.c_void_p * 2)(ctypes.addressof(local), 8)
attempt("process_vm_readv", sys_(310, os.getpid(), iov, 1, iov, 1, 0))
attempt("kcmp", sys_(312, os.getpid(), os.getpid(), 0, 0, 0))
attempt("pidfd_getfd", sys_(438, os.pidfd_open(os.getpid()), 0, 0))
attempt("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
attempt("fsopen", sys_(430, b"tmpfs", 0))
attempt("open_tree", sys_(428, -100, b"/tmp", 1))  # OPEN_TREE_CLONE
attempt("name_to_handle_at", sys_(303, -100, b"/tmp", buffer, ctypes.byref(ctypes.c_int()), 0))
attempt("open_by_handle_at", sys_(304, -100, buffer, 0))
attempt("keyctl", sys_(250, 0, -4, 0, 0, 0))
attempt("modify_ldt", sys_(154, 0, buffer, 16))
attempt("kexec_load", sys_(246, 0, 0, 0, 0))
print(found)
"""
)


async def test_kernel_interfaces_a_sandbox_has_no_use_for_are_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        probe = await bridge.run(KERNEL_INTERFACES)
    assert probe.is_error is False, text_of(probe)
    found = literal_eval(stdout_of(probe))
    # Privileged operations: EPERM, the kernel's own answer without the privilege.
    for name in (
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "syslog",
        "ptrace_traceme",  # allowed by the runtime's default
        "process_vm_readv",  # allowed by the runtime's default, even on itself
        "kcmp",
        "pidfd_getfd",
        "mount",
        "fsopen",
        "open_tree",
        "kexec_load",
    ):
        assert found[name] == EPERM, name
    # Interfaces callers probe for and fall back from: ENOSYS, as on a kernel without them.
    fallbacks = ("io_uring_setup", "name_to_handle_at", "open_by_handle_at", "keyctl", "modify_ldt")
    for name in fallbacks:
        assert found[name] == ENOSYS, name


FILTER_IN_FORCE = (
    HELPERS
    + """
attempt("unshare_user", lambda: libc.unshare(0x10000000))
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
print({"Seccomp": status["Seccomp"].strip(), **found})
"""
)

WORKLOAD = """
import asyncio, concurrent.futures, multiprocessing, os, socket, subprocess, threading
out = {}
with concurrent.futures.ThreadPoolExecutor(4) as pool:  # pthread_create: clone3, then clone
    out["threads"] = sum(pool.map(lambda x: x * x, range(10)))
with multiprocessing.get_context("fork").Pool(2) as pool:
    out["pool"] = pool.map(abs, [-1, -2, -3])
context = multiprocessing.get_context("fork")
queue, lock = context.Queue(), context.Lock()  # POSIX semaphores in /dev/shm
with lock:
    worker = context.Process(target=queue.put, args=("queued",))
    worker.start()
    out["queue"] = queue.get(timeout=60)
    worker.join()
out["subprocess"] = subprocess.run(["sh", "-c", "echo sub"], capture_output=True, text=True).stdout
spawned = os.posix_spawn("/bin/true", ["true"], {})  # glibc: clone3, then clone(CLONE_VFORK)
out["posix_spawn"] = os.waitstatus_to_exitcode(os.waitpid(spawned, 0)[1])
async def main():
    async def echo(reader, writer):
        writer.write(await reader.read(5))
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(echo, "localhost", 0)
    reader, writer = await asyncio.open_connection("localhost", server.sockets[0].getsockname()[1])
    writer.write(b"hello")
    await writer.drain()
    echoed = await reader.read(5)
    writer.close()
    server.close()
    child = await asyncio.create_subprocess_exec("echo", "async", stdout=asyncio.subprocess.PIPE)
    return echoed.decode(), (await child.communicate())[0].decode()
out["asyncio"] = await main()
print(out)
"""


async def test_threads_processes_multiprocessing_and_asyncio_run_under_the_filter(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        in_force = await bridge.run(FILTER_IN_FORCE)
        workload = await bridge.run(WORKLOAD, timeout=120)
    assert literal_eval(stdout_of(in_force)) == {"Seccomp": "2", "unshare_user": EPERM}
    assert workload.is_error is False, text_of(workload)
    assert literal_eval(stdout_of(workload)) == {
        "threads": 285,
        "pool": [1, 2, 3],
        "queue": "queued",
        "subprocess": "sub\n",
        "posix_spawn": 0,
        "asyncio": ("hello", "async\n"),
    }


NUMERIC = """
import numpy as np, pandas as pd
matrix = np.arange(40_000, dtype=float).reshape(200, 200)
frame = pd.DataFrame({"key": [i % 3 for i in range(300)], "value": range(300)})
sums = frame.groupby("key")["value"].sum().tolist()
print({"trace": float((matrix @ matrix.T).trace()), "sums": sums})
"""


async def test_numpy_and_pandas_run_under_the_filter(tmp_path: Path, sandbox_image: str) -> None:
    async with open_bridge(tmp_path) as bridge:
        in_force = await bridge.run(FILTER_IN_FORCE)
        numeric = await bridge.run(NUMERIC, timeout=120)
    assert literal_eval(stdout_of(in_force)) == {"Seccomp": "2", "unshare_user": EPERM}
    assert numeric.is_error is False, text_of(numeric)
    expected = float(sum(value * value for value in range(40_000)))
    assert literal_eval(stdout_of(numeric)) == {
        "trace": expected,
        "sums": [14850, 14950, 15050],
    }
