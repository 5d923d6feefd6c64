"""Every hardening option, observed from inside a real sandbox through its real channel."""

from __future__ import annotations

import errno
import json

import anyio
import pytest
from bridge_core.channel import ChannelClosed
from bridge_core.runtime._hardening import LOG_MAX_BYTES
from bridge_core.runtime._verify import RUNTIME_INJECTED_ENV
from bridge_core.runtime.base import MiB

from .conftest import StartShell

pytestmark = [pytest.mark.container, pytest.mark.engine]


async def test_sandbox_runs_as_nobody_with_no_capabilities_and_no_new_privileges(
    start_shell: StartShell,
) -> None:
    shell = await start_shell()
    ids = await shell.value("import os\n(os.getuid(), os.getgid(), os.getgroups())")
    assert ids[:2] == (65534, 65534)
    assert set(ids[2]) <= {65534}
    status = await shell.value(
        "dict(line.split(':\\t') for line in open('/proc/self/status').read().splitlines()"
        " if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp:')))"
    )
    assert int(status["CapEff"], 16) == 0
    assert int(status["CapPrm"], 16) == 0
    assert int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # a seccomp filter is on: the bridge's, below


FILTER = """
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def errno_of(result):
    return 0 if result >= 0 else ctypes.get_errno()
try:
    socket.socket(40, socket.SOCK_STREAM)  # AF_VSOCK
    vsock = 0
except OSError as exc:
    vsock = exc.errno
(errno_of(libc.unshare(0x10000000)), errno_of(libc.syscall(435, 0, 0)), vsock)
"""


async def test_the_bridges_system_call_filter_is_the_one_applied(start_shell: StartShell) -> None:
    # Same profile under podman and docker: unshare(CLONE_NEWUSER), clone3, socket(AF_VSOCK).
    shell = await start_shell()
    assert await shell.value(FILTER) == (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT)


WRITE_ERRNO = """
import os
def write_errno(path):
    try:
        with open(os.path.join(path, 'probe'), 'w') as f:
            f.write('x')
    except OSError as exc:
        return exc.errno
    return 0
"""


async def test_root_filesystem_run_and_var_tmp_are_not_writable(start_shell: StartShell) -> None:
    shell = await start_shell()
    await shell.value(WRITE_ERRNO + "0")
    assert await shell.value("write_errno('/etc')") == errno.EROFS
    assert await shell.value("write_errno('/run')") in (errno.EROFS, errno.EACCES)
    assert await shell.value("write_errno('/var/tmp')") in (errno.EROFS, errno.EACCES)
    assert await shell.value("write_errno('/run/bridge')") in (errno.EROFS, errno.EACCES)
    assert await shell.value("write_errno('/tmp')") == 0


async def test_tmp_fills_up_at_its_cap_with_enospc(start_shell: StartShell) -> None:
    shell = await start_shell(tmpfs_bytes=16 * MiB)
    written, code = await shell.value(
        "import os\n"
        "written = 0\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        while True:\n"
        "            f.write(b'x' * 65536)\n"
        "            f.flush()\n"
        "            written += 65536\n"
        "except OSError as exc:\n"
        "    code = exc.errno\n"
        "os.remove('/tmp/fill')\n"
        "(written, code)"
    )
    assert code == errno.ENOSPC
    assert 15 * MiB <= written <= 16 * MiB


async def test_every_network_connection_fails_at_once(start_shell: StartShell) -> None:
    shell = await start_shell()
    interfaces = await shell.value("import os\nsorted(os.listdir('/sys/class/net'))")
    assert interfaces == ["lo"]
    code = await shell.value(
        "import socket\n"
        "def connect_errno(address):\n"
        "    s = socket.socket()\n"
        "    s.settimeout(10)\n"
        "    try:\n"
        "        s.connect(address)\n"
        "    except TimeoutError:\n"
        "        return 'timeout'\n"
        "    except OSError as exc:\n"
        "        return exc.errno\n"
        "    finally:\n"
        "        s.close()\n"
        "connect_errno(('1.1.1.1', 443))"
    )
    assert code == errno.ENETUNREACH  # refused by the kernel, not a timeout
    assert await shell.value("connect_errno(('10.0.2.2', 80))") == errno.ENETUNREACH


async def test_memory_bomb_kills_the_container_and_status_says_memory_limit_exceeded(
    start_shell: StartShell,
) -> None:
    shell = await start_shell(memory_bytes=96 * MiB)
    with pytest.raises(ChannelClosed), anyio.fail_after(60):
        await shell.execute("hog = []\nwhile True:\n    hog.append(bytearray(8 * 1024 * 1024))")
    with anyio.fail_after(30):
        # The channel closes before the runtime has recorded the exit; nothing to wait on.
        while (state := await shell.backend.status(shell.sandbox)).running:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    assert state.oom_killed, state
    assert state.describe("96m") == "memory limit 96m exceeded (the container was OOM-killed)"


async def test_fork_bomb_gets_eagain_and_leaves_host_and_sandbox_usable(
    start_shell: StartShell,
) -> None:
    shell = await start_shell(pids=32)
    forked, code = await shell.value(
        "import os, signal, time\n"
        "children = []\n"
        "code = None\n"
        "try:\n"
        "    while len(children) < 1000:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        children.append(pid)\n"
        "except OSError as exc:\n"
        "    code = exc.errno\n"
        "for pid in children:\n"
        "    os.kill(pid, signal.SIGKILL)\n"
        "    os.waitpid(pid, 0)\n"
        "(len(children), code)"
    )
    assert code == errno.EAGAIN
    assert 0 < forked < 32
    assert await shell.value("1 + 1") == 2  # the sandbox recovered
    assert (await anyio.run_process(["true"])).returncode == 0  # the host can still fork


async def test_cpu_quota_is_set_in_the_containers_cgroup(start_shell: StartShell) -> None:
    shell = await start_shell(cpu_quota=50_000, cpu_period=100_000)
    quota = await shell.value(
        "import os\n"
        "v1 = '/sys/fs/cgroup/cpu/cpu.cfs_quota_us'\n"
        "v1 = v1 if os.path.exists(v1) else '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us'\n"
        "(open(v1).read().split() + open(v1.replace('quota', 'period')).read().split()"
        " if os.path.exists(v1) else open('/sys/fs/cgroup/cpu.max').read().split())"
    )
    assert [int(n) for n in quota] == [50_000, 100_000]


async def test_ulimits_and_pids_limit_are_in_force(start_shell: StartShell) -> None:
    shell = await start_shell(pids=48, nofile=512, nproc=2048)
    limits = await shell.value(
        "import resource\n"
        "(resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_NPROC))"
    )
    assert limits == ((512, 512), (2048, 2048))


async def test_the_environment_holds_nothing_from_the_host(
    start_shell: StartShell, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_BRIDGE_TEST_SECRET", "hunter2")
    shell = await start_shell()
    # The container's environment is what its init (pid 1) got; the sandbox client later adds
    # a few variables of its own to its process.
    names = await shell.value(
        "sorted(item.split(b'=')[0].decode()"
        " for item in open('/proc/1/environ', 'rb').read().split(b'\\0') if item)"
    )
    inspect = await anyio.run_process(
        [shell.backend.name, "image", "inspect", "--format", "{{json .Config.Env}}", sandbox_image]
    )
    image_env = {item.partition("=")[0] for item in json.loads(inspect.stdout)}
    assert "MCP_BRIDGE_TEST_SECRET" not in names
    assert set(names) <= image_env | RUNTIME_INJECTED_ENV, names


LOG_FLOOD = """
import gc, os
from bridge_sandbox_client._client import SandboxClient
client = next(o for o in gc.get_objects() if isinstance(o, SandboxClient))
chunk = b"x" * MiB
for _ in range(48):
    os.write(client.capture.original_stderr_fd, chunk)
0
"""


async def test_writing_past_the_output_capture_into_the_container_log_stays_capped(
    start_shell: StartShell,
) -> None:
    shell = await start_shell()
    # The descriptor the container log captures is reachable from sandbox code.
    assert await shell.value(LOG_FLOOD.replace("MiB", str(MiB))) == 0
    # podman's k8s-file log sits where the bridge put it; docker's json-file log where docker
    # keeps it (its one rotation file, max-file=1, is the same path).
    where = "{{.HostConfig.LogConfig.Path}}" if shell.backend.name == "podman" else "{{.LogPath}}"
    inspect = await anyio.run_process(
        [shell.backend.name, "inspect", f"--format={where}", shell.sandbox.name]
    )
    log = anyio.Path(inspect.stdout.decode().strip())
    # Docker's copier may still be rotating what went in: between closing the file and opening
    # it again the path is briefly absent (dockerd 20.10, a CI run met it). Absent is not big.
    for _ in range(200):
        try:
            size = (await log.stat()).st_size
            break
        except FileNotFoundError:
            await anyio.sleep(0.05)
    else:
        pytest.fail(f"{log} stayed absent for 10 s")
    assert size <= LOG_MAX_BYTES  # 48 MiB went in
